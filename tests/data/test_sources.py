"""Sources: the right shapes, captions that fit, and captions that the modality array determines."""

from __future__ import annotations

import re

import numpy as np
import pytest

from prism.core.errors import PrismError
from prism.core.families import FAMILIES
from prism.data.sources import graph, image, lm_text, source_module, table, ts, video, vla


@pytest.fixture(scope="module")
def all_samples():
    cache = {}

    def get(family):
        if family not in cache:
            cache[family] = list(source_module(family).samples(0))
        return cache[family]

    return get


@pytest.mark.parametrize("family", ["text_image", "text_ts", "text_graph", "text_table", "text_video"])
def test_shapes_and_caption_lengths(all_samples, family):
    spec = FAMILIES[family]
    samples = all_samples(family)
    assert len(samples) > 1000
    for s in samples:
        assert s.modality.dtype == np.float32 and s.modality.shape == spec.modality_shape
        assert 0 < len(s.caption.encode()) <= spec.text_len - 2, s.caption
    assert len({s.key for s in samples}) == len(samples)


def test_unknown_family():
    with pytest.raises(PrismError, match="unknown family"):
        source_module("text_smell")


def test_image_caption_names_the_true_digit(all_samples):
    from sklearn.datasets import load_digits

    labels = load_digits().target
    for s in all_samples("text_image")[::3]:
        i = int(s.source.removeprefix("digit"))
        assert s.caption.endswith(f"digit {labels[i]}")
        assert 0.0 <= s.modality.min() and s.modality.max() <= 1.0


def test_graph_captions_are_read_off_the_adjacency(all_samples):
    for s in all_samples("text_graph"):
        a = s.modality
        n = int(np.trace(a))
        assert (a == a.T).all() and not a[n:].any() and not a[:, n:].any()
        m = int((a.sum() - n) / 2)
        if s.caption[0].isdigit() and "nodes" in s.caption:
            assert s.caption.startswith(f"{n} nodes, {m} edges"), (s.key, s.caption)


def test_graph_subgraphs_are_small_and_connected():
    import networkx as nx

    rng = np.random.default_rng(0)
    g = graph.grow_subgraph(nx.karate_club_graph(), 12, rng)
    assert g.number_of_nodes() == 12 and nx.is_connected(g)


def test_ts_windows_are_normalised_and_captions_match_stats(all_samples):
    samples = all_samples("text_ts")
    for s in samples[::7]:
        for ch in s.modality:
            assert (not ch.any()) or (abs(ch.mean()) < 1e-4 and abs(ch.std() - 1) < 1e-3)
        if s.facet == 1:
            assert s.caption == ts.stats_caption(s.modality)
    sources = {s.source for s in samples}
    assert {"co2", "sunspots", "nile", "elnino", "macrodata", "motion0000", "gunpoint0000"} <= sources
    assert sum(s.source == "co2" for s in samples) > 40  # all co2 windows: one source item


def test_ts_long_series_windows_do_not_overlap():
    import statsmodels.api as sm

    windows = [w for w in ts.unlabelled_windows() if w[0] == "co2"]
    assert [j for _, j, _, _ in windows] == list(range(len(windows))) and len(windows) > 20
    raw = sm.datasets.co2.load_pandas().data["co2"].interpolate(limit_direction="both").to_numpy()
    flat = np.concatenate([x[0] for _, _, x, _ in windows])
    np.testing.assert_array_equal(flat, raw[: flat.size])


def test_video_motion_matches_caption(all_samples):
    moved = 0
    for s in all_samples("text_video")[::5]:
        frames = s.modality[:, 0]
        m = re.match(r"digit \d (moving (\S+), (\d) px per frame|standing still)", s.caption)
        assert m, s.caption
        if m.group(2) is None:
            assert all((f == frames[0]).all() for f in frames)
            continue
        dr, dc = video.DIRECTIONS[m.group(2)]
        speed = int(m.group(3))
        np.testing.assert_array_equal(frames[1], video.shift(frames[0], dr * speed, dc * speed))
        moved += 1
    assert moved > 100


def test_table_rows_are_standardised_and_padded(all_samples):
    widths = {"iris": 4, "wine": 13, "cancer": 30, "diabetes": 10, "linnerud": 3}
    for s in all_samples("text_table")[::4]:
        name = s.source.rstrip("0123456789")
        assert s.caption.startswith(f"{name}: ")
        assert not s.modality[widths[name] :].any()


def test_vla_steps_pair_views_with_expert_actions(monkeypatch):
    monkeypatch.setattr(vla, "EPISODES_PER_LEVEL", 2)
    samples = list(vla.samples(0))
    assert {s.source for s in samples} == {f"{lvl.split('-')[1].lower()}{e:04d}" for lvl in vla.LEVELS for e in (0, 1)}
    actions = {"left", "right", "forward", "pickup", "drop", "toggle", "done"}
    for s in samples:
        mission, action = s.caption.rsplit(" -> ", 1)
        assert action in actions and mission
        assert s.modality.shape == (3, 7, 7) and 0.0 <= s.modality.min() and s.modality.max() <= 1.0
        assert len(s.caption.encode()) <= FAMILIES["vla"].text_len - 2
    again = list(vla.samples(0))
    assert [s.caption for s in again] == [s.caption for s in samples]


def test_lm_text_passages_come_from_the_documentation_not_a_cache(tmp_path, monkeypatch):
    items = lm_text.load_passages(62)
    assert len(items) > 40_000  # enough for the default study's 0.5 text share without repeating a passage
    assert all(len(p) <= 62 and p.isascii() for _, p in items)
    # A planted "cache" wherever PRISM_CACHE points (or the old default name) changes nothing.
    for where in (tmp_path, tmp_path / "home" / ".cache" / "prism"):
        where.mkdir(parents=True, exist_ok=True)
        (where / "lm_text-py3.11-62.json").write_text('[["topic-x", "planted passage of no documentation"]]')
    monkeypatch.setenv("PRISM_CACHE", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert lm_text.load_passages(62) == items
    assert lm_text.passages_digest(lm_text.load_passages(62)) == lm_text.passages_digest(items)


def test_image_views_are_seeded_distinct_and_split_by_source_image():
    from sklearn.datasets import load_digits

    samples = list(image.samples(0))
    assert len(samples) == 1797 * image.VIEWS * image.FACETS
    by_source: dict[str, set[bytes]] = {}
    for s in samples:
        by_source.setdefault(s.source, set()).add(s.modality.tobytes())
    assert all(len(v) == image.VIEWS for v in by_source.values())  # every view differs
    labels = load_digits().target
    assert all(s.caption.endswith(f"digit {labels[int(s.source[5:])]}") for s in samples[::3])
    assert [s.modality.tobytes() for s in image.samples(0)][:60] == [s.modality.tobytes() for s in samples[:60]]
    assert [s.modality.tobytes() for s in image.samples(1)][3] != samples[3].modality.tobytes()


def test_image_helpers():
    img = np.zeros((8, 8), np.float32)
    img[0:3, 0:3] = 1.0
    assert image.where(img) == "upper left"
    assert table.salient(np.array([0.1, 2.0, -3.0]), ["a", "b_x", "c (cm)"]) == "high b x, low c"
