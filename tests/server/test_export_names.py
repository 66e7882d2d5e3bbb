"""``nbinfer export`` refuses names that would break the files it writes, and quotes the script.

Model names and execution-environment names become directories and land in ``config.pbtxt``,
``build_python_env.sh`` and the KServe manifest. A trailing newline in ``--execution-env`` used
to produce a ``build_python_env.sh`` that failed ``bash -n``; now such names are refused before
anything is written, with the option and the character named, and every good name gives a
script bash accepts.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from nbinfer.errors import InvalidInputError
from nbinfer.server.export import export_model, kserve_manifest, main_export, to_yaml
from nbinfer.server.export_python import _sh_double_quoted
from nbinfer.server.model import Model
from nbinfer.server.repository import ModelRepository

_TRIPLE = """
from nbinfer.server.model import Model


class Triple(Model):
    name = "triple"
    inputs = [("x", "INT32", [-1])]
    outputs = [("y", "INT32", [-1])]

    def predict(self, inputs, context):
        return {"y": inputs["x"] * 3}
"""


@pytest.fixture()
def bash() -> str:
    found = shutil.which("bash")
    if found is None:
        pytest.skip("bash is not installed")
    return found


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    (tmp_path / "repo" / "triple" / "1").mkdir(parents=True)
    (tmp_path / "repo" / "triple" / "1" / "model.py").write_text(_TRIPLE)
    return tmp_path / "repo"


def _argv(repo: Path, out: Path, *extra: str) -> list[str]:
    return ["--model-repository", str(repo), "--model", "triple", "--out", str(out), *extra]


@pytest.mark.parametrize(
    ("option", "value", "shown"),
    [
        ("--execution-env", "python_env\n", r"'\n' (U+000A, a control character)"),
        ("--execution-env", "python_env.tar.gz\r", r"'\r' (U+000D, a control character)"),
        ("--execution-env", "env;touch pwned", "';' (U+003B)"),
        ("--execution-env", "$(id)", "'$' (U+0024)"),
        ("--execution-env", "my env", "' ' (U+0020, white space)"),
        ("--execution-env", "../env", "'/' (U+002F)"),
        ("--execution-env", "build_python_env.sh", "writes a file of that name itself"),
        ("--name", "triple\n", r"'\n' (U+000A, a control character)"),
        ("--name", "tri`id`ple", "'`' (U+0060)"),
        ("--name", "..", "starts with '.'"),
        ("--name", "-triple", "starts with '-'"),
        ("--name", "x" * 129, "129 characters (at most 128)"),
        ("--model", "triple\n", r"'\n' (U+000A, a control character)"),
        ("--execution-env-python", "3.11\n", "use 3.<minor>"),
    ],
)
def test_export_refuses_a_bad_name_before_writing_anything(
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    option: str,
    value: str,
    shown: str,
) -> None:
    out = tmp_path / "out"
    argv = _argv(repo, out)
    if option == "--model":
        argv[argv.index("--model") + 1] = value
    else:
        argv.append(f"{option}={value}")  # also takes a value starting with '-'

    if option == "--execution-env-python":
        argv += ["--execution-env"]
    assert main_export(argv) == 2
    err = capsys.readouterr().err
    assert f"{option} {value!r} is refused" in err
    assert shown in err
    assert not out.exists()


def _model(repo: Path) -> tuple[Model, ModelRepository]:
    repository = ModelRepository(repo, device="cpu")
    model = repository.resolve("triple").model
    assert model is not None
    return model, repository


def test_export_model_refuses_bad_names_naming_the_parameter(repo: Path, tmp_path: Path) -> None:
    model, repository = _model(repo)
    try:
        with pytest.raises(InvalidInputError, match=r"^name 'triple\\n' is refused: character"):
            export_model(model, tmp_path / "out", name="triple\n")
        with pytest.raises(InvalidInputError, match=r"^execution_env 'env\\n' is refused"):
            export_model(model, tmp_path / "out", execution_env="env\n")
        model.name = "triple\n"  # a model whose own name cannot be a directory
        with pytest.raises(InvalidInputError, match=r"the model's name \(pass name=\)"):
            export_model(model, tmp_path / "out")
    finally:
        repository.close()
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("name", "env"),
    [
        ("triple", "python_env.tar.gz"),
        ("my-model.v2", "python_env"),
        ("Model_2", "env-3.11_x"),
        ("m", "e"),
    ],
)
def test_good_names_give_a_script_bash_accepts(
    repo: Path,
    tmp_path: Path,
    bash: str,
    capsys: pytest.CaptureFixture[str],
    name: str,
    env: str,
) -> None:
    out = tmp_path / "out"
    assert main_export(_argv(repo, out, "--name", name, "--execution-env", env)) == 0
    script = out / name / "build_python_env.sh"
    checked = subprocess.run([bash, "-n", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    assert f'TARGET="$MODEL_DIR/{env}"\n' in script.read_text()
    config = (out / name / "config.pbtxt").read_text()
    assert f'string_value: "$$TRITON_MODEL_DIRECTORY/{env}"' in config
    assert f'name: "{name}"' in config
    capsys.readouterr()


@pytest.mark.parametrize(
    "text", ["plain", 'a"b', "$(touch pwned)", "`id`", "back\\slash", "$HOME", "new\nline"]
)
def test_script_quoting_keeps_any_text_literal(bash: str, tmp_path: Path, text: str) -> None:
    script = f'X="{_sh_double_quoted(text)}"\nprintf %s "$X"\n'
    done = subprocess.run(
        [bash, "-c", script], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    assert done.stdout == text
    assert not (tmp_path / "pwned").exists()


def test_kserve_manifest_refuses_a_trailing_newline_and_yaml_quotes_it() -> None:
    with pytest.raises(InvalidInputError, match="not a DNS label"):
        kserve_manifest("iris\n", "gs://b/m")
    yaml = pytest.importorskip("yaml")
    data = {"storageUri": "gs://b/m\nkind: Secret", "name": "ok\n"}
    assert yaml.safe_load(to_yaml(data)) == data
