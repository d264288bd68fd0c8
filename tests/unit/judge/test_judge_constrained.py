"""``judge run --constrained`` refusals and bookkeeping, without a model: the missing library and the
paper preset are one line each before anything is read or loaded (real CLI subprocesses on a real
run directory); free votes keep their config ids; a bad schema is one line."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest

from tamperbench.errors import UserError
from tamperbench.judge.runner import JudgeConfig
from tamperbench.judge.samples import SAMPLES, sample_rows, write_fixture_run

# the library made unimportable in the child only, as on a machine without the extra installed
NO_LLGUIDANCE = ("import sys; sys.modules['llguidance'] = None; "
                 "sys.argv = ['tamperbench', *sys.argv[1:]]; from tamperbench.cli import main; main()")


def _digest(run) -> str:
    return hashlib.sha256((run / "records.duckdb").read_bytes()).hexdigest()


def _judge(run, *args: str, code: str | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", code] if code else [sys.executable, "-m", "tamperbench.cli"]
    return subprocess.run([*cmd, "judge", "run", str(run), "--judge", "embedded", *args], capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def run(tmp_path):
    return write_fixture_run(tmp_path / "run", sample_rows(SAMPLES[:2]))


def test_missing_library_is_one_line_naming_the_install_before_anything(run):
    before = _digest(run)
    p = _judge(run, "--constrained", code=NO_LLGUIDANCE)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert lines[0].startswith("error: --constrained:") and "pip install 'tamperbench[constrained]'" in lines[0]
    assert "llguidance==1.9.1" in lines[0]
    assert _digest(run) == before  # nothing written (no judge tables, no evidence)


def test_constrained_with_the_paper_preset_is_refused_in_one_line(run):
    before = _digest(run)
    p = _judge(run, "--constrained", "--preset", "paper")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "--constrained: not with --preset paper" in p.stderr
    assert _digest(run) == before


def test_free_votes_keep_their_config_id_and_constrained_ones_get_their_own():
    from tamperbench.judge.prompt import load_prompt_spec
    from tamperbench.store import trial_key

    free = JudgeConfig()
    # the id free votes had before --constrained existed (its formula then): resumed runs must not re-judge
    assert free.config_id == trial_key({"prompt_sha256": load_prompt_spec().sha256, "fence": "nonce",
                                        "max_new_tokens": 160, "seed": 0, "temperature": 0.0})[:16]
    con = JudgeConfig(constrained=True)
    assert con.config_id != free.config_id and free.grammar() is None


def test_the_verdict_grammar_names_schema_and_library():
    from tamperbench.judge.constrained import verdict_grammar, verdict_schema_text

    prov = verdict_grammar().provenance()
    assert prov["grammar_schema"] == verdict_schema_text()
    assert prov["grammar_sha256"] == hashlib.sha256(verdict_schema_text().encode()).hexdigest()
    assert prov["grammar_library"] == "llguidance 1.9.1"
    assert '"whitespace_flexible": false' in prov["grammar_options"]


@pytest.mark.parametrize("schema, why", [("{not json", "not JSON"), ("[1, 2]", "must be a JSON object"),
                                         ('{"type": "no-such-type"}', "cannot be compiled")])
def test_a_bad_schema_is_one_line(schema, why):
    from tamperbench.models.decoding.grammar import JsonGrammar

    with pytest.raises(UserError, match=why) as err:
        JsonGrammar.from_schema(schema, option="--readout")
    assert str(err.value).startswith("--readout:") and "\n" not in str(err.value)
