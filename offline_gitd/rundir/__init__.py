"""offline_gitd.rundir: everything a run directory is (docs/architecture.md#runs-are-self-contained).

Its files and their columns, checkpoints and the seals that verify them, provenance, scalars and
TensorBoard, the run flags every run command shares, and the one lifecycle both training loops call.
"""
