"""Env wrappers: the ads noise wrapper of the GiGPO noise experiment, and the `make_noisy` registry factory."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from gigpo.envs.base import Env, EnvError
from gigpo.envs.faults import can_snapshot

# ------------------------------------------------------------------------------------------------------------ ads
# An ad is TEMPLATE.format(product=..., slogan=..., price=...). Every combination is a distinct string
# (templates, products, slogans and prices are each distinct and appear verbatim), so the catalogue holds
# len(AD_TEMPLATES) * len(AD_PRODUCTS) * len(AD_SLOGANS) * len(AD_PRICES) ads.
AD_TEMPLATES: tuple[str, ...] = (
    "Sponsored: {product} - {slogan} Now only ${price}!",
    "AD | {product} | {slogan} | from ${price}",
    "Limited offer! {product} for just ${price}. {slogan}",
    "[Promoted] {slogan} Get the {product} today at ${price}.",
    "Deal of the day: {product}, ${price}. {slogan}",
    "Customers also bought: {product} (${price}) - {slogan}",
    "Flash sale >> {product} at ${price} << {slogan}",
    "{slogan} Shop the {product}, starting at ${price}. Ad",
)
_ADJ = ("Ultra", "Eco", "Smart", "Pro", "Classic", "Turbo", "Cozy", "Mini", "Deluxe", "Nova")
_NOUN = (
    "Blender", "Headphones", "Yoga Mat", "Coffee Grinder", "Desk Lamp", "Backpack", "Water Bottle",
    "Air Fryer", "Phone Case", "Sneakers", "Smartwatch", "Throw Blanket",
)  # fmt: skip
AD_PRODUCTS: tuple[str, ...] = tuple(f"{a} {n}" for a in _ADJ for n in _NOUN)
AD_SLOGANS: tuple[str, ...] = (
    "Free shipping on every order.",
    "Rated 5 stars by thousands.",
    "Because you deserve the best.",
    "Made to last a lifetime.",
    "Upgrade your everyday.",
    "Only while stocks last.",
    "Loved by professionals.",
    "Try it risk free for 30 days.",
    "The smarter choice.",
    "Designed in California.",
    "Join 1 million happy customers.",
    "Save big this weekend.",
)
AD_PRICES: tuple[str, ...] = tuple(
    f"{d}.{c}" for d in (4, 9, 14, 19, 24, 29, 39, 49, 79, 99) for c in ("99", "49")
)
NUM_ADS: int = len(AD_TEMPLATES) * len(AD_PRODUCTS) * len(AD_SLOGANS) * len(AD_PRICES)

#: Separator of page segments in WebShop-style observations; ads go between segments of such pages.
SEP = " [SEP] "


def ad_text(index: int, max_chars: int | None = None) -> str:
    """Ad number ``index`` in ``[0, NUM_ADS)`` (mixed-radix over template, product, slogan, price).

    With ``max_chars`` the ad is cut to at most that many characters, at a word boundary where possible, ending
    with ``...``.
    """
    if not 0 <= index < NUM_ADS:
        raise ValueError(f"ad index {index} outside [0, {NUM_ADS})")
    index, p = divmod(index, len(AD_PRICES))
    index, s = divmod(index, len(AD_SLOGANS))
    t, q = divmod(index, len(AD_PRODUCTS))
    text = AD_TEMPLATES[t].format(product=AD_PRODUCTS[q], slogan=AD_SLOGANS[s], price=AD_PRICES[p])
    if max_chars is not None and len(text) > max_chars:
        cut = text[: max(max_chars - 3, 1)]
        head = cut.rsplit(" ", 1)[0] if " " in cut else cut
        text = head + "..."
    return text


def insert_ads(observation: str, ads: list[str], rng: np.random.Generator) -> str:
    """Insert each ad at a uniformly drawn boundary of ``observation``.

    Boundaries are between ``[SEP]``-separated segments when the text has ``" [SEP] "`` (an ad becomes one more
    segment), else between lines (an ad becomes one more line); the start and the end count as boundaries, so a
    text of k parts has k + 1. Ads are placed one after another into the growing text.
    """
    sep = SEP if SEP in observation else "\n"
    parts = observation.split(sep)
    for ad in ads:
        parts.insert(int(rng.integers(0, len(parts) + 1)), ad)
    return sep.join(parts)


_INSTANCE_IDS = itertools.count()


class AdNoiseWrapper(Env):
    """Insert distractor ads into a text env's observations; the true state stays in ``info``.

    Per observation (the reset observation is step 0, the one returned by the k-th :meth:`step` is step k), with
    probability ``ad_rate`` it gets ``ads_per_obs`` ads drawn uniformly from the :data:`NUM_ADS` catalogue, each cut
    to ``ad_max_chars``, at boundaries drawn by :func:`insert_ads`.

    Seeding: all draws for one observation come from
    ``np.random.default_rng([noise_seed, reset_seed, instance_id, step])``, so the same four numbers give the same
    ads, independent of call order. ``instance_id`` defaults to a process-wide counter (0, 1, 2, ... in construction
    order), so the N envs of a group, reset with one seed and sitting in the same true state at the same step, still
    see *different* ads — as in the GiGPO paper's noise experiment, where exact observation matching then finds
    almost no step groups. Pass equal ``instance_id`` values to make envs show identical ads, or explicit ids for
    runs that must reproduce across processes (e.g. a resumed run that builds its envs in a different order).

    ``info["state_key"]`` is the wrapped env's (the true state, unaffected by ads); ``info["clean_observation"]``
    holds the observation without ads. Task, instructions and admissible actions are passed through unchanged.
    """

    def __init__(
        self,
        env: Env,
        *,
        ad_rate: float = 0.5,
        ads_per_obs: int = 1,
        ad_max_chars: int | None = 120,
        noise_seed: int = 0,
        instance_id: int | None = None,
    ) -> None:
        if not 0.0 <= ad_rate <= 1.0 or math.isnan(ad_rate):
            raise ValueError(f"ad_rate must be in [0, 1], got {ad_rate}")
        if ads_per_obs < 1:
            raise ValueError(f"ads_per_obs must be >= 1, got {ads_per_obs}")
        if ad_max_chars is not None and ad_max_chars < 8:
            raise ValueError(f"ad_max_chars must be >= 8 (or None for whole ads), got {ad_max_chars}")
        self.env = env
        self.ad_rate = ad_rate
        self.ads_per_obs = ads_per_obs
        self.ad_max_chars = ad_max_chars
        self.noise_seed = int(noise_seed)
        self.instance_id = next(_INSTANCE_IDS) if instance_id is None else int(instance_id)
        self.max_steps = env.max_steps
        self._reset_seed: int | None = None
        self._step = 0

    @property
    def instructions(self) -> str:  # type: ignore[override]
        return self.env.instructions

    def __getattr__(self, name: str) -> Any:
        # Other attributes (size, solution_length, desc, ...) read through to the wrapped env. "env" itself must not
        # recurse while unpickling, before __init__ has set it.
        if name == "env":
            raise AttributeError(name)
        if name in ("snapshot", "restore"):  # the wrapper's own pair (it has state too), only over an env with one
            if not can_snapshot(self.env):
                raise AttributeError(name)
            return getattr(self, f"_{name}")
        return getattr(self.env, name)

    def _snapshot(self) -> tuple:
        """The wrapped env's snapshot and the wrapper's place in the episode (its seed and step)."""
        return (self.env.snapshot(), self._reset_seed, self._step)

    def _restore(self, snapshot: tuple) -> tuple[str, dict[str, Any]]:
        """Restore the wrapped env and the wrapper's place; what it shows carries this instance's own ads."""
        inner, self._reset_seed, self._step = snapshot
        observation, info = self.env.restore(inner)
        return self._noisy(observation), {**info, "clean_observation": observation}

    def _noisy(self, observation: str) -> str:
        if self._reset_seed is None:
            raise EnvError("AdNoiseWrapper: step() before reset()")
        # SeedSequence entropy must be non-negative: fold each part into the unsigned 64-bit range.
        entropy = [
            x & 0xFFFF_FFFF_FFFF_FFFF
            for x in (self.noise_seed, self._reset_seed, self.instance_id, self._step)
        ]
        rng = np.random.default_rng(entropy)
        if rng.random() >= self.ad_rate:
            return observation
        picks = rng.integers(0, NUM_ADS, size=self.ads_per_obs)
        return insert_ads(observation, [ad_text(int(i), self.ad_max_chars) for i in picks], rng)

    def reset(self, seed: int) -> tuple[str, dict[str, Any]]:
        observation, info = self.env.reset(seed)
        self._reset_seed, self._step = int(seed), 0
        info = dict(info)
        info["clean_observation"] = observation
        return self._noisy(observation), info

    def step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        if self._reset_seed is None:
            raise EnvError("AdNoiseWrapper: step() before reset()")
        observation, reward, done, info = self.env.step(action)
        self._step += 1
        info = dict(info)
        info["clean_observation"] = observation
        return self._noisy(observation), reward, done, info

    def close(self) -> None:
        self.env.close()


_WRAPPER_OPTIONS = ("ad_rate", "ads_per_obs", "ad_max_chars", "noise_seed", "instance_id")


def make_noisy(
    *,
    base: str,
    ad_rate: float = 0.5,
    ads_per_obs: int = 1,
    ad_max_chars: int | None = 120,
    noise_seed: int = 0,
    instance_id: int | None = None,
    **base_kwargs: Any,
) -> AdNoiseWrapper:
    """Registry factory: ``make(base, **base_kwargs)`` wrapped in :class:`AdNoiseWrapper` with the ad options.

    An option neither the wrapper nor the base env accepts raises ``ValueError`` naming both option lists, before
    anything is built.
    """
    from gigpo.envs.registry import env_kwargs_check, get_spec, make  # lazy: the registry imports this module

    get_spec(base)  # an unknown base is its own clear error
    try:
        env_kwargs_check(base, base_kwargs)
    except ValueError as err:
        raise ValueError(f"{err}; the noise wrapper's options are: {', '.join(_WRAPPER_OPTIONS)}") from None
    return AdNoiseWrapper(
        make(base, **base_kwargs),
        ad_rate=ad_rate,
        ads_per_obs=ads_per_obs,
        ad_max_chars=ad_max_chars,
        noise_seed=noise_seed,
        instance_id=instance_id,
    )
