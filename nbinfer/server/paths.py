"""The embedded server's path policy: every file or directory named by a request.

Layer: the server (imports ``nbinfer.errors``, ``config``, ``protocol`` and the server's own
modules); never the client, transports, session, interop or notebook.

A request can name files in four ways: a model name (it becomes a directory for uploaded files),
``file:<path>`` keys of a repository load, paths inside a config override
(``default_model_filename``, ``label_filename``) and shared-memory keys. All of them pass here:

* names match a strict pattern (:data:`NAME_PATTERN`): ASCII letters, digits, ``_ . -``, not
  starting with a dot or dash, no separators, no NUL, at most 128 characters;
* relative paths are made of such names (at most :data:`MAX_DEPTH` deep), never absolute,
  never ``..``, and once joined to the model directory they are resolved (symlinks included) and
  must stay inside it;
* a refusal says the same thing whether an outside path exists or not (nothing outside is looked
  at before the check);
* uploaded content is sniffed (:func:`code_kind`): pickles, non-NumPy zip archives (TorchScript,
  ``torch.save``), native executables and Python source are code, whatever their file name.

Example::

    files = ModelFiles(Path("/tmp/x/m"), strict=True)
    files.file("1/model.onnx", what="default_model_filename")   # /tmp/x/m/1/model.onnx
    files.file("/etc/passwd", what="default_model_filename")    # InvalidInputError
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from nbinfer.errors import InvalidInputError

__all__ = [
    "MAX_DEPTH",
    "NAME_PATTERN",
    "ModelFiles",
    "check_model_name",
    "check_relative_path",
    "check_shm_key",
    "code_kind",
    "upload_plan",
]

#: One name: a model, one path component, or a POSIX shared-memory key without its slash.
NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}")
#: Most components a request-named relative path may have (``1/model.onnx`` has two).
MAX_DEPTH = 8

_NAME_RULE = "ASCII letters, digits, '_', '.', '-'; not starting with '.' or '-'; at most 128"


def _shown(value: str) -> str:
    """A bounded, printable rendering of a refused value for error messages."""
    text = value if len(value) <= 80 else value[:77] + "..."
    return repr(text)


def check_model_name(name: str) -> str:
    """Return ``name`` when it is a safe model name (it may become a directory).

    Raises:
        InvalidInputError: the name does not match :data:`NAME_PATTERN`.
    """
    if not isinstance(name, str) or NAME_PATTERN.fullmatch(name) is None:
        raise InvalidInputError(
            f"invalid model name {_shown(str(name))}: a model name may only contain "
            f"{_NAME_RULE} characters"
        )
    return name


def check_relative_path(rel: str, *, what: str) -> PurePosixPath:
    """Validate a request-named path relative to a model directory (nothing is touched).

    Raises:
        InvalidInputError: an absolute path, ``..``, a backslash, NUL or another character
            outside the pattern, an empty component or too many components.
    """
    parts = rel.split("/") if isinstance(rel, str) else []
    if not parts or len(parts) > MAX_DEPTH or any(NAME_PATTERN.fullmatch(p) is None for p in parts):
        raise InvalidInputError(
            f"{what} {_shown(str(rel))}: the path must be relative and inside the model "
            f"directory, made of names with only {_NAME_RULE} characters, at most "
            f"{MAX_DEPTH} deep"
        )
    return PurePosixPath(*parts)


def check_shm_key(key: str) -> str:
    """The POSIX shared-memory object name for ``key`` (``"abc"`` or ``"/abc"`` -> ``"/abc"``).

    Raises:
        InvalidInputError: the key is not ``/name`` with a name matching :data:`NAME_PATTERN`.
    """
    bare = key[1:] if isinstance(key, str) and key.startswith("/") else key
    if not isinstance(bare, str) or NAME_PATTERN.fullmatch(bare) is None:
        raise InvalidInputError(
            f"shared memory key {_shown(str(key))} is not a valid POSIX shared memory name "
            f"(expected '/name', the name made of {_NAME_RULE} characters)"
        )
    return "/" + bare


_PICKLE = re.compile(rb"\x80[\x02-\x05]")
_NATIVE = (b"\x7fELF", b"\xfe\xed\xfa", b"\xce\xfa\xed\xfe", b"\xcf\xfa\xed\xfe")
_PYTHON = re.compile(
    rb"^[ \t]*(?:import[ \t]+[A-Za-z_]|from[ \t]+[A-Za-z_.]+[ \t]+import\b|def[ \t]+\w+[ \t]*\(|"
    rb"class[ \t]+\w+[ \t]*[(:]|exec[ \t]*\(|eval[ \t]*\(|__import__[ \t]*\()",
    re.MULTILINE,
)


def code_kind(content: bytes) -> str | None:
    """What code ``content`` carries, or None for plain data.

    Looks at the bytes, not the file name: a pickle (protocol 2 and later), a zip archive that is
    not a NumPy ``.npz`` (TorchScript, ``torch.save``, zipapps), a native executable / shared
    library, or Python source (import / def / class / exec statements at the start of a line).
    """
    head = bytes(content[:8])
    if _PICKLE.match(head):
        return "a pickle"
    if head.startswith(_NATIVE):
        return "a native executable or library"
    if head.startswith(b"PK"):
        try:
            with zipfile.ZipFile(io.BytesIO(content)) as archive:
                members = archive.namelist()
        except (zipfile.BadZipFile, ValueError, OSError):
            return "a zip archive"
        if not members or any(not m.endswith(".npy") for m in members):
            return "a zip archive (TorchScript, torch.save or other code-bearing archive)"
        return None
    if _PYTHON.search(bytes(content[:65536])):
        return "Python source"
    return None


@dataclass(frozen=True)
class ModelFiles:
    """Where a model may read its files from: its own directory, and nothing above it.

    Args:
        root: The model directory.
        strict: Resolve symlinks and require the target inside ``root`` (request-influenced
            loads: uploaded files or a config override). The operator's own repository config
            keeps its symlinks, but still names files relative to the model directory only.
        uploaded: Files of this load that came from the request (relative to ``root``).
        allow_code: Whether code-bearing files may come from the request.
    """

    root: Path
    strict: bool = False
    uploaded: frozenset[PurePosixPath] = frozenset()
    allow_code: bool = False

    def file(self, rel: str, *, what: str, base: str = "") -> Path:
        """The path of ``base/rel`` inside the model directory (it need not exist).

        Raises:
            InvalidInputError: ``rel`` breaks the policy; the message is the same whether an
                outside target exists or not.
        """
        checked = check_relative_path(rel, what=what)
        prefix = PurePosixPath(base) if base else PurePosixPath()
        path = self.root / prefix / checked
        if self.strict:
            root = self.root.resolve()
            target = path.resolve()
            if target != root and root not in target.parents:
                raise InvalidInputError(
                    f"{what} {_shown(rel)}: the path must be relative and inside the model "
                    "directory (it leaves it through a symbolic link)"
                )
        return path

    def code_file(self, rel: str, *, what: str, base: str = "") -> Path:
        """Like :meth:`file`, for a file whose loading runs code (TorchScript, model.py).

        Raises:
            InvalidInputError: the policy is broken, or the file came from the request while
                code uploads are disabled.
        """
        path = self.file(rel, what=what, base=base)
        relative = PurePosixPath(base) / rel if base else PurePosixPath(rel)
        if not self.allow_code and relative in self.uploaded:
            raise InvalidInputError(
                f"{what} {_shown(rel)}: the file was uploaded with this load and loading it "
                "runs code; uploading code is disabled on this server (start it with "
                "--allow-code-upload to accept it)"
            )
        return path


def upload_plan(
    files: Iterable[tuple[str, bytes]], *, allow_code: bool, data_suffixes: frozenset[str]
) -> list[tuple[PurePosixPath, bytes]]:
    """Validate every ``file:`` upload of a load before anything is written.

    Raises:
        InvalidInputError: a key breaks the path policy, or (without ``allow_code``) a file is
            code by its suffix or by its content.
    """
    plan: list[tuple[PurePosixPath, bytes]] = []
    for key, content in files:
        rel = key[5:] if key.startswith("file:") else key
        path = check_relative_path(rel, what="file override")
        if not allow_code:
            kind = code_kind(content)
            if path.suffix.lower() not in data_suffixes or kind is not None:
                allowed = ", ".join(sorted(data_suffixes))
                found = f" (its content is {kind})" if kind else ""
                raise InvalidInputError(
                    f"file override {_shown(key)}: uploading code or pickled files is disabled "
                    f"on this server{found}; data files only ({allowed}); start it with "
                    "--allow-code-upload to accept model.py / TorchScript uploads"
                )
        plan.append((path, bytes(content)))
    return plan
