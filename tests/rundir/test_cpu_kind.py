"""The CPU's kind in a run's provenance and a recording's metadata (docs/datasets.md#manifests): a
seeded recording repeats only on the same kind, so the description must tell kinds apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from offline_gitd.rundir.provenance import cpu_kind, describe_cpu

# two processors of one machine, as Linux writes them (trimmed to the keys that matter)
PROCESSOR = """processor\t: {index}
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC
stepping\t: 1
flags\t\t: fpu sse4_2 avx avx2 avx512f avx512bw
"""
EPYC = "\n".join(PROCESSOR.format(index=index) for index in range(2))


def test_the_first_processor_names_the_kind_with_its_widest_vector_extension() -> None:
    assert describe_cpu(EPYC) == "AMD EPYC (family 25, model 17, stepping 1, avx512f)"


def test_a_cpu_without_avx512_is_another_kind() -> None:
    older = EPYC.replace("avx512f avx512bw", "").replace("model\t\t: 17", "model\t\t: 1")
    assert describe_cpu(older) == "AMD EPYC (family 25, model 1, stepping 1, avx2)"
    assert describe_cpu(older) != describe_cpu(EPYC)


def test_an_arm_cpuinfo_gives_its_features() -> None:
    arm = "processor\t: 0\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd evtstrm aes\nCPU implementer\t: 0x41\n"
    assert describe_cpu(arm) == "unnamed CPU (asimd)"


def test_nothing_known_gives_an_empty_description() -> None:
    assert describe_cpu("") == ""
    assert describe_cpu("processor\t: 0\n") == ""


def test_this_machine_is_described_by_its_own_cpuinfo() -> None:
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists():
        pytest.skip("no /proc/cpuinfo on this system")
    names = [
        line.partition(":")[2].strip() for line in cpuinfo.read_text().splitlines() if line.startswith("model name")
    ]
    described = cpu_kind()
    assert described and (not names or described.startswith(names[0]))
