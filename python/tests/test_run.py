"""placelab.run runs a scenario as `placelab run` does."""

import json

import placelab as pl


def test_run_writes_a_summary(tmp_path, small_graph):
    from conftest import SOURCE_DIR

    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(
        "name: tiny\n"
        f"graph: {SOURCE_DIR / 'scenarios' / 'graphs' / 'quickstart.json'}\n"
        "machine: k80x4\n"
        "devices: gpus\n"
        "grouping: scope_units\n"
        "samples: 48\n"
        "batch: 12\n"
        "seeds: 1\n"
        "learners:\n"
        "  reinforce: {}\n"
        "baselines: [single_gpu, heft]\n")
    folder = pl.run(scenario, output=tmp_path / "out")
    assert folder == tmp_path / "out"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary
    assert (folder / "report.md").exists()


def test_run_rejects_a_bad_scenario(tmp_path):
    scenario = tmp_path / "bad.yaml"
    scenario.write_text("name: bad\nmodel: inception_v3\nsamples: -3\n")
    try:
        pl.run(scenario, output=tmp_path / "out")
    except pl.InputError as e:
        assert "bad.yaml:3" in str(e)
    else:
        raise AssertionError("expected InputError")


def test_run_and_sweep_bound_what_the_cli_bounds(tmp_path, monkeypatch):
    # The CLI's flags check these; the module passed them straight through (seeds=10**9 would have
    # filled a vector of a billion seeds, name="../x" written outside results/).
    monkeypatch.chdir(tmp_path)
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text("name: tiny\nmodel: cifar10_cnn\nsamples: 12\nlearners:\n  mcmc: {}\n")
    for call, expect in [(lambda: pl.run(scenario, seeds=10**9), "--seeds 1000000000: must be in [1, 1000]"),
                         (lambda: pl.sweep([scenario], name="../x"), "--name ../x: must be a plain name"),
                         (lambda: pl.sweep([scenario, scenario]), "listed twice in the sweep")]:
        try:
            call()
        except pl.InputError as e:
            assert expect in str(e), str(e)
        else:
            raise AssertionError(f"expected InputError with {expect!r}")
    assert not (tmp_path / "x").exists() and not (tmp_path / "results" / "tiny").exists()


def test_sweep_runs_each_scenario_once_and_writes_the_table(tmp_path, monkeypatch):
    from conftest import SOURCE_DIR

    monkeypatch.chdir(tmp_path)  # results/sweep-<name>/ is relative to the working directory
    files = []
    for name, learner in (("tiny-a", "reinforce"), ("tiny-b", "post")):
        f = tmp_path / f"{name}.yaml"
        f.write_text(
            f"name: {name}\n"
            f"graph: {SOURCE_DIR / 'scenarios' / 'graphs' / 'quickstart.json'}\n"
            "machine: k80x4\n"
            "devices: gpus\n"
            "grouping: scope_units\n"
            "samples: 24\n"
            "batch: 12\n"
            f"output: {tmp_path / name}\n"
            "learners:\n"
            f"  {learner}: {{}}\n"
            "baselines: [single_gpu]\n")
        files.append(f)
    folder = pl.sweep(files, seeds=2, name="t")
    assert folder.name == "sweep-t"
    table = (tmp_path / "results" / "sweep-t" / "summary.csv").read_text().splitlines()
    assert table[0].startswith("scenario,model,machine")
    assert [row.split(",")[0] for row in table[1:]] == ["tiny-a", "tiny-b"]
    first = (tmp_path / "tiny-a" / "summary.json").stat().st_mtime_ns
    pl.sweep(files, seeds=2, name="t")  # finished: skipped, the table written again
    assert (tmp_path / "tiny-a" / "summary.json").stat().st_mtime_ns == first
