"""Shared fixtures: the module under test comes from PYTHONPATH (CTest sets it to <build>/python);
PLACELAB_CLI names the command line the results are compared with."""

import os
import pathlib

import pytest

pl = pytest.importorskip("placelab", reason="the placelab module is not built (pybind11 missing?)")

SOURCE_DIR = pathlib.Path(os.environ.get("PLACELAB_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))


@pytest.fixture(scope="session")
def inception():
    return pl.Graph.from_model("inception_v3:batch=32")


@pytest.fixture(scope="session")
def k80x4():
    return pl.Machine.preset("k80x4")


@pytest.fixture(scope="session")
def inception_sim(inception, k80x4):
    return pl.Simulator(inception, k80x4)


@pytest.fixture(scope="session")
def small_graph():
    return pl.Graph.from_json(SOURCE_DIR / "scenarios" / "graphs" / "quickstart.json")


@pytest.fixture
def cli():
    path = os.environ.get("PLACELAB_CLI")
    if not path or not os.path.exists(path):
        pytest.skip("PLACELAB_CLI does not name the placelab command line")
    return path
