"""Model names: the bundled ones resolve to their weights, a directory to itself, and a name that is
neither, or a registered model that is not installed, is refused with a message that says what to do."""

from __future__ import annotations

import pytest

import llm.serving.models as registry
from llm.serving.models import ModelNotFound, model_dir, register, served_name
from llm.support.models import BUNDLED


@pytest.mark.parametrize("name", ["bundled", "bundled-ar"])
def test_a_bundled_name_is_its_weights(name):
    assert model_dir(name) == BUNDLED[name] and (model_dir(name) / "config.json").is_file()
    assert served_name(name) == name


def test_a_directory_is_itself_and_served_under_its_name(tmp_path):
    assert model_dir(tmp_path) == tmp_path and model_dir(str(tmp_path)) == tmp_path
    assert served_name(str(tmp_path)) == tmp_path.name


def test_a_name_that_is_neither_registered_nor_a_directory_is_refused(tmp_path):
    with pytest.raises(ModelNotFound, match=r"neither a model name \(bundled, bundled-ar\) nor a checkpoint"):
        model_dir("bundld")
    with pytest.raises(ModelNotFound, match="nor a checkpoint directory"):
        model_dir(tmp_path / "nowhere")


def test_a_registered_model_not_installed_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "MODELS", {})
    register("mine", tmp_path / "mine", install="make mine")
    with pytest.raises(ModelNotFound, match=r"the model 'mine' is not installed \(make mine\)"):
        model_dir("mine")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "config.json").write_text("{}")
    assert model_dir("mine") == tmp_path / "mine" and served_name("mine") == "mine"
