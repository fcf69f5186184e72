"""Site checks (real executables), host checks and how the doctor aggregates answers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from phalanx.health import Doctor, health_of, result
from phalanx.health.checks import ERR, NOT_APPLICABLE, PASS, WARN
from phalanx.health.host import DiskCheck, MemoryCheck
from phalanx.health.site import SiteCheck, site_checks
from phalanx.spec.resources import CheckStatus, NodeCheck, NodeHealth


def _script(directory: Path, name: str, body: str, *, executable: bool = True) -> Path:
    path = directory / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755 if executable else 0o644)
    return path


@pytest.mark.parametrize(("body", "status", "message"), [
    ("echo starting; echo 'all 8 NICs up'; exit 0", PASS, "all 8 NICs up"),
    ("echo 'nccl allreduce 180 GB/s of 200'; exit 1", WARN, "nccl allreduce 180 GB/s of 200"),
    ("echo 'ib0 down'; exit 2", ERR, "ib0 down"),
    ("echo weird; exit 7", ERR, "exited with 7 (0, 1 or 2 expected): weird"),
    ("echo 'no such tool' >&2; exit 5", ERR, "exited with 5 (0, 1 or 2 expected): no such tool"),
    ("kill -9 $$", ERR, "killed by signal 9"),
    ("exit 0", PASS, "exited with 0"),
])
def test_site_check_answers(tmp_path: Path, body: str, status: CheckStatus,
                            message: str) -> None:
    answer = SiteCheck(_script(tmp_path, "probe", body)).run()
    assert (answer.name, answer.status, answer.message) == ("site/probe", status, message)


def test_site_check_past_its_timeout_is_err(tmp_path: Path) -> None:
    answer = SiteCheck(_script(tmp_path, "slow", "sleep 5"), timeout=0.3).run()
    assert (answer.status, answer.message) == (ERR, "timed out after 0.3s")


def test_site_check_that_cannot_run_is_err_with_why(tmp_path: Path) -> None:
    answer = SiteCheck(_script(tmp_path, "nomode", "exit 0", executable=False)).run()
    assert answer.status is ERR
    assert answer.message.startswith(f"cannot run {tmp_path / 'nomode'}: Permission denied")


def test_site_directory_is_listed_at_every_run(tmp_path: Path) -> None:
    doctor = Doctor("n1", [], site_dir=tmp_path)
    assert doctor.run().checks == []
    _script(tmp_path, "b-ok", "echo fine")
    _script(tmp_path, "a-bad", "echo 'bad'; exit 2")
    (tmp_path / ".hidden").write_text("")
    report = doctor.run()
    assert [c.name for c in report.checks] == ["site/a-bad", "site/b-ok"]
    assert report.health is NodeHealth.UNHEALTHY
    assert report.reasons == ["site/a-bad: bad"]
    assert site_checks(tmp_path / "absent") == []


class _Raises:
    name = "broken"

    def run(self) -> NodeCheck:
        raise RuntimeError("boom")


def test_a_check_that_raises_is_err() -> None:
    report = Doctor("n1", [_Raises()]).run()
    assert report.checks[0].status is ERR
    assert report.checks[0].message == "the check failed to run: boom"
    assert report.health is NodeHealth.UNHEALTHY


@pytest.mark.parametrize(("answers", "status", "health"), [
    ([], PASS, NodeHealth.HEALTHY),
    ([NOT_APPLICABLE, PASS], PASS, NodeHealth.HEALTHY),
    ([NOT_APPLICABLE], PASS, NodeHealth.HEALTHY),
    ([PASS, WARN], WARN, NodeHealth.DEGRADED),
    ([WARN, ERR, PASS], ERR, NodeHealth.UNHEALTHY),
])
def test_aggregation(answers: list[CheckStatus], status: CheckStatus,
                     health: NodeHealth) -> None:
    results = [result(f"c{i}", s, f"said {s}") for i, s in enumerate(answers)]
    got_status, got_health, reasons = health_of(results)
    assert (got_status, got_health) == (status, health)
    assert reasons == [f"c{i}: said {s}" for i, s in enumerate(answers) if s in (WARN, ERR)]


def test_disk_thresholds(tmp_path: Path) -> None:
    assert DiskCheck([tmp_path]).run().status is PASS
    low = DiskCheck([tmp_path], warn_fraction=1.01, err_fraction=0.0, err_bytes=0).run()
    assert low.status is WARN and low.message.startswith(f"disk low under {tmp_path}")
    full = DiskCheck([tmp_path], err_bytes=2**62).run()
    assert full.status is ERR and full.values["free_bytes"] > 0
    gone = DiskCheck([tmp_path / "absent"]).run()
    assert gone.status is NOT_APPLICABLE


def test_memory_thresholds() -> None:
    assert MemoryCheck(warn_fraction=0.0, err_fraction=0.0).run().status is PASS
    assert MemoryCheck(warn_fraction=1.01, err_fraction=0.0).run().status is WARN
    tight = MemoryCheck(warn_fraction=1.01, err_fraction=1.01).run()
    assert tight.status is ERR and tight.message.startswith("memory exhausted")
    assert 0 < tight.values["available_fraction"] <= 1


def test_doctor_cli_reports_a_site_check(tmp_path: Path, nvml) -> None:
    from tests.health.conftest import checks_of, run_doctor

    site = tmp_path / "site"
    site.mkdir()
    _script(site, "ib", "echo 'ib0 at 100 of 400 Gb/s'; exit 1")
    code, report = run_doctor(nvml, site_dir=site)
    assert code == 0 and report["status"] == "WARN" and report["health"] == "degraded"
    assert checks_of(report)["site/ib"]["message"] == "ib0 at 100 of 400 Gb/s"
    assert os.environ.get("FAKE_NVML_CONFIG") is None  # only the child saw the fake
