"""Where the G1 model comes from: the lookup order, the error that names every way to provide
it, and `duorl assets g1` extracting only the model (and meshes) from an mjlab wheel."""

import json
import sys
import types
import zipfile
from pathlib import Path

import pytest

from duorl.cli import main as cli
from duorl.config.errors import ConfigError
from duorl.envs.g1 import assets

XML = "<mujoco model='fake'/>"
PREFIX = "mjlab/asset_zoo/robots/unitree_g1/xmls/"


@pytest.fixture
def clean(monkeypatch, tmp_path):
    """No DUORL_G1_XML, an empty cache dir, and no installed mjlab."""
    monkeypatch.delenv(assets.ENV_VAR, raising=False)
    monkeypatch.setenv(assets.CACHE_ENV_VAR, str(tmp_path / "cache"))
    monkeypatch.setattr(assets.importlib.util, "find_spec", lambda name: None)
    return tmp_path


def fake_wheel(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(PREFIX + "g1.xml", XML)
        zf.writestr(PREFIX + "assets/pelvis.STL", b"solid")
        zf.writestr(PREFIX + "assets/nested/x.STL", b"no")  # not a mesh the MJCF names
        zf.writestr("mjlab/asset_zoo/robots/go1/xmls/go1.xml", "<mujoco/>")
        zf.writestr("mjlab/__init__.py", "raise ImportError('never imported')")
    return path


def test_missing_model_error_names_every_way(clean):
    with pytest.raises(assets.G1ModelNotFoundError) as e:
        assets.resolve_g1_xml(None)
    msg = str(e.value)
    assert isinstance(e.value, ConfigError) and e.value.key == "task.robot_xml"
    for way in ("duorl assets g1", assets.ENV_VAR, "pip install mjlab", "task.robot_xml=", str(assets.cached_xml())):
        assert way in msg, way
    assert "\n" not in msg


def test_lookup_order(clean, monkeypatch):
    tmp = clean
    cache_xml = assets.extract_from_wheel(fake_wheel(tmp / "w.whl"), meshes=False)
    assert assets.resolve_g1_xml(None) == cache_xml  # 4: the cache

    pkg = tmp / "site" / "mjlab"
    (pkg / "asset_zoo/robots/unitree_g1/xmls").mkdir(parents=True)
    (pkg / "asset_zoo/robots/unitree_g1/xmls/g1.xml").write_text(XML)
    spec = types.SimpleNamespace(submodule_search_locations=[str(pkg)])
    monkeypatch.setattr(assets.importlib.util, "find_spec", lambda name: spec if name == "mjlab" else None)
    assert assets.resolve_g1_xml(None) == pkg / "asset_zoo/robots/unitree_g1/xmls/g1.xml"  # 3: mjlab

    env_xml = tmp / "env.xml"
    env_xml.write_text(XML)
    monkeypatch.setenv(assets.ENV_VAR, str(env_xml))
    assert assets.resolve_g1_xml(None) == env_xml  # 2: DUORL_G1_XML

    explicit = tmp / "explicit.xml"
    explicit.write_text(XML)
    assert assets.resolve_g1_xml(str(explicit)) == explicit  # 1: task.robot_xml


def test_wrong_explicit_paths_are_errors_not_fallbacks(clean, monkeypatch):
    assets.extract_from_wheel(fake_wheel(clean / "w.whl"), meshes=False)  # a usable cache exists
    with pytest.raises(assets.G1ModelNotFoundError, match="task.robot_xml=/nope.xml"):
        assets.resolve_g1_xml("/nope.xml")
    monkeypatch.setenv(assets.ENV_VAR, "/nope2.xml")
    with pytest.raises(assets.G1ModelNotFoundError, match="DUORL_G1_XML"):
        assets.resolve_g1_xml(None)


def test_real_mjlab_layout_is_found_without_import(monkeypatch, tmp_path):
    """find_spec on a top-level package locates it without running its __init__."""
    monkeypatch.delenv(assets.ENV_VAR, raising=False)
    # the real mjlab (the test extra installs it) may be imported by the mjlab tests of this process
    for name in [m for m in sys.modules if m == "mjlab" or m.startswith("mjlab.")]:
        monkeypatch.delitem(sys.modules, name)
    site = tmp_path / "site"
    with zipfile.ZipFile(fake_wheel(tmp_path / "w.whl")) as zf:
        zf.extractall(site)
    monkeypatch.syspath_prepend(str(site))
    found = assets.installed_mjlab_xml()
    assert found == site / PREFIX / "g1.xml"
    assert "mjlab" not in sys.modules  # its __init__ raises: it was never imported


def test_extract_keeps_only_the_model_and_meshes(clean):
    wheel = fake_wheel(clean / "w.whl")
    dest = clean / "out"
    xml = assets.extract_from_wheel(wheel, dest, meshes=True)
    files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert files == ["SOURCE.json", "assets/pelvis.STL", "g1.xml"]
    assert xml.read_text() == XML
    assert json.loads((dest / "SOURCE.json").read_text())["source"] == "w.whl"
    assets.extract_from_wheel(wheel, dest, meshes=False)  # replaces the tree atomically
    assert sorted(p.name for p in dest.iterdir()) == ["SOURCE.json", "g1.xml"]
    assert not list(clean.glob("out.old-*")) and not list(clean.glob(".g1-*"))


def test_extract_rejects_a_wheel_without_the_model(clean):
    bad = clean / "bad.whl"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("mjlab/__init__.py", "")
    with pytest.raises(FileNotFoundError, match="g1.xml"):
        assets.extract_from_wheel(bad, clean / "out")


def test_download_uses_this_interpreters_pip_without_deps(clean, monkeypatch):
    seen = {}

    def fake_run(cmd, capture_output, text):
        seen["cmd"] = cmd
        fake_wheel(Path(cmd[cmd.index("-d") + 1]) / "mjlab-1.6.0-py3-none-any.whl")
        return types.SimpleNamespace(returncode=0, stdout="", stderr="")

    monkeypatch.setattr(assets.subprocess, "run", fake_run)
    xml = assets.fetch_g1()
    cmd = seen["cmd"]
    assert cmd[:4] == [sys.executable, "-m", "pip", "download"] and "--no-deps" in cmd
    assert cmd[-1] == assets.MJLAB_REQUIREMENT
    assert xml == assets.cached_xml() and (xml.parent / "assets" / "pelvis.STL").is_file()
    # filled: a second call downloads nothing
    monkeypatch.setattr(assets.subprocess, "run", lambda *a, **k: pytest.fail("downloaded again"))
    assert assets.fetch_g1() == xml


def test_download_failure_is_reported(clean, monkeypatch, capsys):
    monkeypatch.setattr(assets.subprocess, "run",
                        lambda *a, **k: types.SimpleNamespace(returncode=1, stdout="", stderr="No matching distribution"))
    assert cli.main(["assets", "g1"]) == 1
    assert "No matching distribution" in capsys.readouterr().err


def test_cli_assets_from_a_wheel(clean, capsys):
    wheel = fake_wheel(clean / "w.whl")
    assert cli.main(["assets", "g1", "--wheel", str(wheel), "--no-meshes"]) == 0
    out = capsys.readouterr().out
    assert str(assets.cached_xml()) in out and assets.cached_xml().is_file()
    assert not (assets.g1_cache_dir() / "assets").exists()
    assert cli.main(["assets", "h1"]) == 2


def test_if_missing_skips_the_download_when_a_model_is_found(clean, monkeypatch, capsys):
    env_xml = clean / "env.xml"
    env_xml.write_text(XML)
    monkeypatch.setenv(assets.ENV_VAR, str(env_xml))
    monkeypatch.setattr(assets.subprocess, "run", lambda *a, **k: pytest.fail("downloaded"))
    assert cli.main(["assets", "g1", "--if-missing"]) == 0
    assert str(env_xml) in capsys.readouterr().out and not assets.cached_xml().exists()
