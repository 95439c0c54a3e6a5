"""WebShop catalog cache: written atomically, read back identical, rebuilt when missing/corrupt/stale."""

from __future__ import annotations

import json

import pytest

from gigpo.envs.webshop.catalog import CATALOG_VERSION, generate_catalog, load_or_build

N = 120  # a small catalog keeps these tests fast; the format is the same at 1,000+


def _cache_file(folder):
    (path,) = folder.glob("catalog-*.json")
    return path


def test_cache_written_and_read_back(tmp_path):
    built = load_or_build(N, 5, cache_dir=tmp_path)
    path = _cache_file(tmp_path)
    assert not list(tmp_path.glob("*.tmp"))  # the temp file was renamed, not left behind
    assert json.loads(path.read_text()) == built == generate_catalog(N, 5)
    assert load_or_build(N, 5, cache_dir=tmp_path) == built


@pytest.mark.parametrize(
    "content",
    [b"", b"{not json", b"\xff\xfe\x00garbage", b"[]", json.dumps({"version": CATALOG_VERSION}).encode()],
)
def test_corrupt_cache_is_rebuilt(tmp_path, content):
    expected = load_or_build(N, 5, cache_dir=tmp_path)
    path = _cache_file(tmp_path)
    path.write_bytes(content)
    assert load_or_build(N, 5, cache_dir=tmp_path) == expected
    assert json.loads(path.read_text()) == expected  # and the file is healed


def test_stale_or_truncated_cache_is_rebuilt(tmp_path):
    expected = load_or_build(N, 5, cache_dir=tmp_path)
    path = _cache_file(tmp_path)
    data = json.loads(path.read_text())
    data["products"] = data["products"][:-1]
    path.write_text(json.dumps(data))
    assert load_or_build(N, 5, cache_dir=tmp_path) == expected


def test_unwritable_cache_dir_only_warns(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")  # a file where the cache folder should be: mkdir fails
    with pytest.warns(UserWarning, match="could not write catalog cache"):
        data = load_or_build(N, 5, cache_dir=blocker / "sub")
    assert data == generate_catalog(N, 5)


def test_goal_splits_and_instruction_style():
    data = generate_catalog(N, 5)
    test, train = data["goals"]["test"], data["goals"]["train"]
    assert len(test) == round(0.25 * (len(test) + len(train)))
    asins = {p["asin"] for p in data["products"]}
    for g in test + train:
        assert g["asin"] in asins and g["attributes"]
        text = g["instruction_text"]
        assert text == text.lower()
        if g["price_upper"] < 1e6:
            assert text.endswith(f", and price lower than {g['price_upper']:.2f} dollars")
        for v in g["goal_options"].values():
            assert v in text
