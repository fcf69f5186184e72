"""GPU checks through the real nvidia-ml-py binding, against the fake NVML library."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.health.conftest import FakeNVML, checks_of, run_doctor, statuses

GPU_CHECKS = ("gpu-count", "gpu-xid", "gpu-ecc", "gpu-remapped-rows", "gpu-throttle",
              "gpu-pcie", "gpu-temperature")


def test_healthy_gpus_pass_every_check(nvml: FakeNVML) -> None:
    nvml.add(2)
    code, report = run_doctor(nvml, "--expect-gpus", "2")
    assert code == 0
    assert statuses(report, GPU_CHECKS) == dict.fromkeys(GPU_CHECKS, "PASS")
    assert report["gpus"] == 2
    assert report["health"] == "healthy"
    assert checks_of(report)["gpu-temperature"]["values"]["gpu1_celsius"] == 40


@pytest.mark.parametrize(("settings", "check", "status", "words"), [
    ({"ecc_volatile": 2}, "gpu-ecc", "ERR", "2 uncorrectable ECC error(s) since the last reset"),
    ({"ecc_aggregate": 5}, "gpu-ecc", "WARN", "5 uncorrectable ECC error(s) over its lifetime"),
    ({"remap_pending": 1}, "gpu-remapped-rows", "ERR", "row remap is pending"),
    ({"remap_failed": 1}, "gpu-remapped-rows", "ERR", "row remapping failed"),
    ({"throttle": 0x40}, "gpu-throttle", "WARN", "hardware thermal slowdown"),
    ({"throttle": 0x80 | 0x01}, "gpu-throttle", "WARN", "power brake"),
    ({"throttle": 0x01 | 0x04}, "gpu-throttle", "PASS", "no thermal"),  # idle, power cap
    ({"pcie_width": 8}, "gpu-pcie", "WARN", "PCIe link x8 of x16"),
    ({"pcie_gen": 3}, "gpu-pcie", "WARN", "PCIe link gen 3 of 4"),
    ({"temp": 84}, "gpu-temperature", "WARN", "84°C, within 5°C of slowdown (87°C)"),
    ({"temp": 88}, "gpu-temperature", "ERR", "88°C, at or above its slowdown threshold"),
])
def test_a_fault_on_one_gpu_is_named(
    nvml: FakeNVML, settings: dict[str, int], check: str, status: str, words: str
) -> None:
    nvml.add(1).add(1, **settings)
    code, report = run_doctor(nvml)
    found = checks_of(report)[check]
    assert found["status"] == status
    assert words in found["message"]
    if status != "PASS":
        assert found["message"].startswith("GPU 1: ")
    others = [c for c in report["checks"] if c["name"] != check]
    assert all(c["status"] == "PASS" for c in others if c["name"].startswith("gpu-"))
    assert report["health"] == {"PASS": "healthy", "WARN": "degraded",
                                "ERR": "unhealthy"}[status]
    assert code == (1 if status == "ERR" else 0)
    if status != "PASS":
        assert any(r.startswith(f"{check}: GPU 1") for r in report["reasons"])


def test_xids_critical_is_err_and_application_is_warn(nvml: FakeNVML) -> None:
    nvml.add(2)
    nvml.gpus[1].xids = [13]
    _, report = run_doctor(nvml)
    assert checks_of(report)["gpu-xid"]["status"] == "WARN"
    assert checks_of(report)["gpu-xid"]["message"] == "XID 13 on GPU 1"
    nvml.gpus[0].xids = [79]
    _, report = run_doctor(nvml)
    xid = checks_of(report)["gpu-xid"]
    assert xid["status"] == "ERR"
    assert xid["message"] == "XID 79 on GPU 0, XID 13 on GPU 1"
    assert xid["values"] == {"xids": 2.0, "critical": 1.0}


def test_fewer_gpus_than_advertised_is_err(nvml: FakeNVML) -> None:
    nvml.add(7)
    code, report = run_doctor(nvml, "--expect-gpus", "8")
    count = checks_of(report)["gpu-count"]
    assert (count["status"], count["message"]) == ("ERR", "7 of 8 GPU(s) visible")
    assert count["values"] == {"expected": 8.0, "found": 7.0}
    assert code == 1 and report["health"] == "unhealthy"


def test_no_driver_means_not_applicable_not_a_crash(nvml: FakeNVML) -> None:
    nvml.driver = None
    nvml.add(2)
    code, report = run_doctor(nvml)
    assert code == 0
    assert statuses(report, GPU_CHECKS) == dict.fromkeys(GPU_CHECKS, "N/A")
    assert "Driver Not Loaded" in checks_of(report)["gpu-ecc"]["message"]
    assert "gpus" not in report and report["health"] == "healthy"


def test_no_driver_on_a_node_that_advertises_gpus_is_err(nvml: FakeNVML) -> None:
    nvml.driver = None
    code, report = run_doctor(nvml, "--expect-gpus", "4")
    assert checks_of(report)["gpu-count"]["status"] == "ERR"
    assert "advertises 4 GPU(s)" in checks_of(report)["gpu-count"]["message"]
    assert code == 1


def test_no_library_at_all_is_not_applicable(nvml: FakeNVML, tmp_path) -> None:
    nvml.library_dir = tmp_path / "empty"  # nothing to load
    nvml.library_dir.mkdir()
    code, report = run_doctor(nvml)
    assert code == 0
    assert checks_of(report)["gpu-xid"]["status"] == "N/A"


def test_unsupported_query_is_not_applicable(nvml: FakeNVML) -> None:
    nvml.add(2, unsupported="nvmlDeviceGetRemappedRows")
    _, report = run_doctor(nvml)
    rows = checks_of(report)["gpu-remapped-rows"]
    assert (rows["status"], rows["message"]) == ("N/A", "not supported by these GPUs")


def test_local_discovery_lists_the_gpus_nvml_reports(nvml: FakeNVML) -> None:
    nvml.add(2, memory=42 * 2**30)
    nvml.gpus[1].name = "NVIDIA H100 80GB HBM3"
    script = ("import json; from phalanx.compute.local.gpus import discover_gpus; "
              "print(json.dumps([[g.index, g.uuid, g.name, g.memory_bytes] "
              "for g in discover_gpus()]))")
    done = subprocess.run([sys.executable, "-c", script], env=nvml.env(), capture_output=True,
                          text=True, check=True, timeout=60)
    assert json.loads(done.stdout) == [
        [0, "GPU-00000000", "NVIDIA A100-SXM4-80GB", 42 * 2**30],
        [1, "GPU-00000001", "NVIDIA H100 80GB HBM3", 42 * 2**30],
    ]
