"""Environments: the Atari protocol of Machado et al. (2018) and gymnasium ids (``make.py``)."""
