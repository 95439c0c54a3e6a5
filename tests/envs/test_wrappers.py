"""Ad-noise wrapper: the ad catalogue, seeding by (noise_seed, reset seed, instance id, step), pass-through info."""

from __future__ import annotations

import numpy as np
import pytest

from gigpo.envs import EnvError, make
from gigpo.envs.gridgoal import GridGoalEnv
from gigpo.envs.sokoban import SokobanEnv
from gigpo.envs.wrappers import NUM_ADS, SEP, AdNoiseWrapper, ad_text, insert_ads

ACTIONS = ["up", "right", "down", "left"]


def ads_in(noisy: str, clean: str) -> list[str]:
    """The lines of ``noisy`` that are not lines of ``clean``, checking the clean lines survive in order."""
    clean_lines = clean.split("\n")
    extra, i = [], 0
    for line in noisy.split("\n"):
        if i < len(clean_lines) and line == clean_lines[i]:
            i += 1
        else:
            extra.append(line)
    assert i == len(clean_lines), "ads must only add lines"
    return extra


def run(env, seed: int, actions: list[str]) -> list[tuple]:
    out = [env.reset(seed)]
    for a in actions:
        out.append(env.step(a))
        if out[-1][2]:
            break
    return out


def test_catalogue_has_many_distinct_ads():
    assert NUM_ADS >= 500
    ads = {ad_text(i) for i in range(NUM_ADS)}
    assert len(ads) == NUM_ADS
    short = [ad_text(i, max_chars=30) for i in range(0, NUM_ADS, 97)]
    assert all(len(a) <= 30 and a.endswith("...") for a in short)  # every ad is longer than 30 chars
    with pytest.raises(ValueError):
        ad_text(NUM_ADS)


def test_wrapper_draws_hundreds_of_distinct_ads():
    env = AdNoiseWrapper(GridGoalEnv(max_steps=8), ad_rate=1.0, instance_id=0)
    seen = set()
    for seed in range(150):
        obs, info = env.reset(seed)
        seen.update(ads_in(obs, info["clean_observation"]))
        for a in ACTIONS * 2:
            obs, _, done, info = env.step(a)
            seen.update(ads_in(obs, info["clean_observation"]))
            if done:
                break
    assert len(seen) >= 500


def test_same_seeds_same_ads_and_order_independent():
    a = AdNoiseWrapper(SokobanEnv(), ad_rate=1.0, ads_per_obs=2, noise_seed=3, instance_id=7)
    b = AdNoiseWrapper(SokobanEnv(), ad_rate=1.0, ads_per_obs=2, noise_seed=3, instance_id=7)
    first = run(a, 42, ACTIONS * 3)
    run(a, 5, ACTIONS)  # another episode in between changes nothing
    assert run(a, 42, ACTIONS * 3) == first == run(b, 42, ACTIONS * 3)
    other_noise = AdNoiseWrapper(SokobanEnv(), ad_rate=1.0, ads_per_obs=2, noise_seed=4, instance_id=7)
    assert run(other_noise, 42, ACTIONS * 3) != first


def test_group_members_see_different_ads_in_the_same_true_state():
    group = [AdNoiseWrapper(GridGoalEnv(max_steps=6), ad_rate=1.0) for _ in range(8)]  # counter-assigned ids
    assert len({e.instance_id for e in group}) == 8
    runs = [run(e, 9, ACTIONS) for e in group]
    for t in range(len(runs[0])):
        obs = [r[t][0] for r in runs]
        infos = [r[t][-1] for r in runs]
        assert len({i["state_key"] for i in infos}) == 1 and len({i["clean_observation"] for i in infos}) == 1
        assert len(set(obs)) >= 6  # exact observation matching would split the step group


def test_info_pass_through_and_clean_observation():
    base, noisy = SokobanEnv(), AdNoiseWrapper(SokobanEnv(), ad_rate=1.0, ads_per_obs=3, instance_id=1)
    ob, ib = base.reset(8)
    on, inn = noisy.reset(8)
    assert inn["clean_observation"] == ob and {k: inn[k] for k in ib} == ib
    assert len(ads_in(on, ob)) == 3
    for a in ACTIONS:
        sb, sn = base.step(a), noisy.step(a)
        assert sn[3]["clean_observation"] == sb[0] and sn[1:3] == sb[1:3]
        assert {k: sn[3][k] for k in sb[3]} == sb[3]
        assert len(ads_in(sn[0], sb[0])) == 3
    assert noisy.instructions == base.instructions and noisy.max_steps == base.max_steps
    assert noisy.solution_length == base.solution_length  # other attributes read through


@pytest.mark.parametrize("rate", [0.0, 0.3, 1.0])
def test_ad_rate_is_the_fraction_of_noisy_observations(rate):
    env = AdNoiseWrapper(GridGoalEnv(max_steps=4), ad_rate=rate, instance_id=0)
    noisy = total = 0
    for seed in range(500):
        obs, info = env.reset(seed)
        pairs = [(obs, info)]
        for a in ACTIONS:
            obs, _, done, info = env.step(a)
            pairs.append((obs, info))
            if done:
                break
        total += len(pairs)
        noisy += sum(o != i["clean_observation"] for o, i in pairs)
    assert abs(noisy / total - rate) < 0.04


def test_ad_max_chars_limits_length():
    env = AdNoiseWrapper(GridGoalEnv(), ad_rate=1.0, ad_max_chars=25, instance_id=0)
    for seed in range(50):
        obs, info = env.reset(seed)
        (ad,) = ads_in(obs, info["clean_observation"])
        assert len(ad) <= 25


def test_insert_ads_between_sep_segments():
    page = SEP.join(["Back to Search", "Page 1 (Total results: 3)", "B01", "Red shoe", "$12.00"])
    rng = np.random.default_rng(0)
    for _ in range(50):
        out = insert_ads(page, ["AD one", "AD two"], rng)
        parts = out.split(SEP)
        assert [p for p in parts if not p.startswith("AD")] == page.split(SEP)
        assert sorted(p for p in parts if p.startswith("AD")) == ["AD one", "AD two"]
    positions = {
        insert_ads(page, ["AD"], np.random.default_rng(s)).split(SEP).index("AD") for s in range(200)
    }
    assert positions == set(range(6))  # start, the 4 gaps, end


def test_registry_factory_and_errors():
    env = make("gridgoal-noisy", size=5, ad_rate=1.0, noise_seed=2, instance_id=3)
    assert isinstance(env, AdNoiseWrapper) and isinstance(env.env, GridGoalEnv) and env.env.size == 5
    obs, info = env.reset(0)
    assert obs != info["clean_observation"]
    assert isinstance(make("sokoban-noisy", size=6).env, SokobanEnv)
    with pytest.raises(ValueError, match="noise wrapper's options"):
        make("sokoban-noisy", ad_ratio=0.5)
    with pytest.raises(ValueError, match="unknown env"):
        make("gridgoal-noisy", base="nope")
    with pytest.raises(ValueError):
        AdNoiseWrapper(GridGoalEnv(), ad_rate=1.5)
    with pytest.raises(EnvError):
        AdNoiseWrapper(GridGoalEnv()).step("up")
