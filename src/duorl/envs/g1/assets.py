"""Locating the Unitree G1 model file, and filling the local cache from the mjlab wheel on PyPI.

The model is never vendored (docs/design.md §7). It is found, in this order:
  1. `task.robot_xml` (an explicit path),
  2. the `DUORL_G1_XML` environment variable,
  3. an installed `mjlab` package: located with `importlib.util.find_spec`, never imported (importing
     it would pull torchvision and a CUDA PyTorch),
  4. the cache that `duorl assets g1` fills: `pip download --no-deps mjlab` into a temp dir with this
     interpreter's pip, then only the G1 model file (and, for rendering, its meshes) is extracted.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Optional

from duorl.config.errors import ConfigError

ENV_VAR = "DUORL_G1_XML"
CACHE_ENV_VAR = "DUORL_CACHE_DIR"
# The wheel that publishes the model; pinned because mjlab 1.6.0 is the release tested against
# mujoco 3.11 + mujoco-warp 3.11 (pyproject.toml), and so is its G1 model.
MJLAB_REQUIREMENT = "mjlab==1.6.0"
# Inside the mjlab package (and so inside its wheel, under "mjlab/").
PACKAGE_XML_DIR = ("asset_zoo", "robots", "unitree_g1", "xmls")
XML_NAME = "g1.xml"
MESH_DIR = "assets"  # the MJCF's <compiler meshdir="assets">


class G1ModelNotFoundError(ConfigError):
    """No G1 model file where one was looked for; the message names every way to provide one."""

    def __init__(self, robot_xml: Optional[str], looked: list[str], problem: str = "the Unitree G1 model was not found") -> None:
        super().__init__(
            "task.robot_xml",
            robot_xml,
            f"{problem} (looked in: {'; '.join(looked)})",
            "a path to the G1 MJCF (g1.xml of mjlab's unitree_g1 asset)",
            f"run `duorl assets g1` (downloads the mjlab wheel from PyPI without its dependencies and "
            f"extracts the model into {cache_dir() / 'assets' / 'g1'}), or set {ENV_VAR}=/path/to/g1.xml, "
            f"or `pip install mjlab`, or pass task.robot_xml=/path/to/g1.xml",
        )


def cache_dir() -> Path:
    """duorl's cache root: $DUORL_CACHE_DIR, else $XDG_CACHE_HOME/duorl, else ~/.cache/duorl."""
    if os.environ.get(CACHE_ENV_VAR):
        return Path(os.environ[CACHE_ENV_VAR]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "duorl"


def g1_cache_dir() -> Path:
    return cache_dir() / "assets" / "g1"


def cached_xml() -> Path:
    return g1_cache_dir() / XML_NAME


def installed_mjlab_xml() -> Optional[Path]:
    """The G1 model inside an installed mjlab package, found without importing mjlab."""
    try:
        spec = importlib.util.find_spec("mjlab")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        path = Path(root).joinpath(*PACKAGE_XML_DIR, XML_NAME)
        if path.is_file():
            return path
    return None


def resolve_g1_xml(robot_xml: Optional[str] = None) -> Path:
    """The G1 model file to use (see the module docstring for the order); raises
    G1ModelNotFoundError, naming every way to provide one, when there is none."""
    if robot_xml:
        path = Path(robot_xml).expanduser()
        if path.is_file():
            return path
        # an explicit path that is wrong is an error even if another source exists: never silently
        # train on a different model than the one asked for
        raise G1ModelNotFoundError(robot_xml, [str(path)], "the file given as task.robot_xml does not exist")
    looked = []
    env = os.environ.get(ENV_VAR)
    if env:
        path = Path(env).expanduser()
        if path.is_file():
            return path
        raise G1ModelNotFoundError(None, [f"{ENV_VAR}={env}"], f"the file named by {ENV_VAR} does not exist")
    looked.append(f"{ENV_VAR} (unset)")
    pkg = installed_mjlab_xml()
    if pkg is not None:
        return pkg
    looked.append("an installed mjlab package (none)")
    path = cached_xml()
    if path.is_file():
        return path
    looked.append(str(path))
    raise G1ModelNotFoundError(None, looked)


def _wheel_members(names: list[str], meshes: bool) -> dict[str, str]:
    """{member name in the wheel: path relative to the cache dir} for the files we keep."""
    prefix = "/".join(("mjlab", *PACKAGE_XML_DIR)) + "/"
    out = {}
    for name in names:
        if not name.startswith(prefix) or name.endswith("/"):
            continue
        rel = name[len(prefix):]
        if rel == XML_NAME or (meshes and rel.startswith(MESH_DIR + "/") and "/" not in rel[len(MESH_DIR) + 1:]):
            out[name] = rel
    return out


def extract_from_wheel(wheel: Path, dest: Optional[Path] = None, meshes: bool = True) -> Path:
    """Extract the G1 model (and meshes if asked) from an mjlab wheel into `dest` (default: the
    cache), replacing what is there atomically. Returns the model file's path."""
    dest = Path(dest) if dest is not None else g1_cache_dir()
    with zipfile.ZipFile(wheel) as zf:
        members = _wheel_members(zf.namelist(), meshes)
        if XML_NAME not in members.values():
            raise FileNotFoundError(f"{wheel} has no {'/'.join(('mjlab', *PACKAGE_XML_DIR, XML_NAME))}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".g1-", dir=dest.parent))
        try:
            for name, rel in members.items():
                target = tmp / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(name) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out)
            xml_bytes = (tmp / XML_NAME).read_bytes()
            provenance = {
                "source": wheel.name,
                "xml_sha256": hashlib.sha256(xml_bytes).hexdigest(),
                "meshes": meshes,
                "files": len(members),
            }
            (tmp / "SOURCE.json").write_text(json.dumps(provenance, indent=2) + "\n")
            # swap in: the old copy (if any) is moved aside first so a reader never sees a half tree
            old = None
            if dest.exists():
                old = dest.with_name(dest.name + f".old-{os.getpid()}")
                os.replace(dest, old)
            os.replace(tmp, dest)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return dest / XML_NAME


def download_wheel(requirement: str, into: Path) -> Path:
    """`pip download --no-deps` of `requirement` with this interpreter's pip; returns the wheel."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
           "--disable-pip-version-check", "-d", str(into), requirement]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"`{' '.join(cmd)}` failed (exit {proc.returncode}): {' | '.join(tail)}")
    wheels = sorted(into.glob("mjlab-*.whl"))
    if not wheels:
        raise RuntimeError(f"pip download left no mjlab wheel in {into}")
    return wheels[-1]


def fetch_g1(requirement: str = MJLAB_REQUIREMENT, wheel: Optional[Path] = None, meshes: bool = True,
             dest: Optional[Path] = None, force: bool = False) -> Path:
    """Fill the cache (what `duorl assets g1` runs). A present cache is kept unless `force`."""
    dest = Path(dest) if dest is not None else g1_cache_dir()
    xml = dest / XML_NAME
    if xml.is_file() and not force and (not meshes or (dest / MESH_DIR).is_dir()):
        return xml
    if wheel is not None:
        return extract_from_wheel(Path(wheel), dest, meshes)
    with tempfile.TemporaryDirectory(prefix="duorl-mjlab-") as tmp:
        return extract_from_wheel(download_wheel(requirement, Path(tmp)), dest, meshes)


def assets_command(robot: str, meshes: bool = True, force: bool = False, wheel: Optional[str] = None,
                   requirement: str = MJLAB_REQUIREMENT, if_missing: bool = False) -> int:
    """`duorl assets g1`: fill the cache (or say where the model already comes from). Exit code.
    if_missing: do nothing when the usual lookup already finds a model (what `make test` runs, so
    a machine with DUORL_G1_XML, mjlab or a filled cache needs no network)."""
    if robot != "g1":
        print(f"error: unknown robot {robot!r}; known: g1", file=sys.stderr)
        return 2
    wheel_path = Path(wheel).expanduser() if wheel else None
    if wheel_path is not None:
        # checked first, and an explicit wheel is always extracted: a filled cache must not hide a wrong path
        problem = None if wheel_path.is_file() else "no such file"
        if problem is None and not zipfile.is_zipfile(wheel_path):
            problem = "not a wheel (not a zip archive)"
        if problem is not None:
            print(f"error: --wheel={wheel}: {problem}. Fix: give the path of an mjlab wheel (pip download --no-deps "
                  f"{MJLAB_REQUIREMENT}), or drop --wheel to download it", file=sys.stderr)
            return 2
        force = True
    if if_missing and not force:
        try:
            print(f"G1 model: {resolve_g1_xml(None)}")
            return 0
        except G1ModelNotFoundError:
            pass
    try:
        path = fetch_g1(requirement, wheel_path, meshes, force=force)
    except (OSError, RuntimeError, zipfile.BadZipFile) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"G1 model: {path}")
    try:
        used = resolve_g1_xml(None)
    except G1ModelNotFoundError:  # pragma: no cover - the cache was just filled
        used = path
    if used != path:
        print(f"note: training uses {used} (found earlier in the lookup order: DUORL_G1_XML, then mjlab)")
    return 0
