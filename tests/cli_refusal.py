"""A shared check for bad input to `scripts/train.py` (imported by the agents' run tests)."""

from jaxrl_dist.config.cli import EXIT_CONFIG_ERROR
from jaxrl_dist.tools import train_cli


def assert_refused(config: str, overrides: list[str], needle: str, tmp_path, capsys) -> None:
    """`config` with `overrides` exits 2 with one line of stderr holding `needle`, and writes
    no work dir."""
    workdir = tmp_path / "run"
    code = train_cli.main(["--config", config, "--workdir", str(workdir), *overrides])
    err = capsys.readouterr().err.strip()
    assert code == EXIT_CONFIG_ERROR
    assert len(err.splitlines()) == 1 and needle in err, err
    assert not workdir.exists()
