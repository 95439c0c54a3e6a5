"""WebShopEnv: WebShop's pages, search[...]/click[...] actions and purchase reward over the generated catalog."""

from __future__ import annotations

import math
import os
import re
from dataclasses import replace
from typing import Any

from gigpo.envs.base import Env, EnvError
from gigpo.envs.webshop.catalog import Catalog, Goal, Product, get_catalog
from gigpo.envs.webshop.hard import resolve_difficulty
from gigpo.envs.webshop.pages import BACK_TO_SEARCH, NEXT_PAGE, PREV_PAGE, PageState, clickables, render
from gigpo.envs.webshop.reward import get_reward

_ACTION = re.compile(r"^\s*([A-Za-z_]+)\s*\[(.*)\]\s*$", re.DOTALL)
SEARCH_HINT = "search[<your query>]"

INSTRUCTIONS = """You are shopping on WebShop to buy the product the instruction describes.
Actions (one per turn):
- search[keywords]: search the catalog (only on the search page, where the search box is).
- click[button]: click a button, a product ID, or an option value shown on the current page, e.g. click[b0abc12345],
  click[large], click[next >], click[< prev], click[back to search], click[description], click[buy now].
Results list 10 products per page (50 at most). On a product page choose every option the instruction asks for, then
click[buy now]. The episode ends on Buy Now with a score in [0, 1]; a perfect match scores 1.0."""


class WebShopEnv(Env):
    """Offline WebShop. See docs/envs/webshop.md for the pages, the reward and the differences from the original.

    ``difficulty``: ``"hard"`` (default: paraphrased instructions, near-miss distractors, options to choose,
    calibrated to the real WebShop's rule baseline) or ``"easy"`` (the earlier catalog, reproduced exactly); the
    five knobs after it override the hard defaults (``gigpo.envs.webshop.hard.Difficulty``).

    ``reset(seed)`` picks goal ``seed mod len(split goals)``. ``info["state_key"]`` is (page kind, query, results
    page, ASIN, chosen options); ``info["admissible_actions"]`` lists ``click[x]`` for every clickable on the page,
    plus the hint ``search[<your query>]`` where the search box is; ``info["available_actions"]`` is WebShop's own
    ``{"has_search_bar", "clickables"}``. Reward is paid once, on Buy Now; running out of steps ends with 0.
    """

    instructions = INSTRUCTIONS

    def __init__(
        self,
        *,
        split: str = "train",
        num_products: int = 1000,
        catalog_seed: int = 0,
        max_steps: int = 15,
        cache_dir: str | os.PathLike[str] | None = None,
        goals_per_product: int = 2,
        difficulty: str = "hard",
        paraphrase: float | None = None,
        hidden_attributes: float | None = None,
        near_misses: int | None = None,
        goal_option_rate: float | None = None,
        item_page_options: float | None = None,
    ) -> None:
        self._check(split, max_steps)
        knobs = resolve_difficulty(
            difficulty,
            paraphrase=paraphrase,
            hidden_attributes=hidden_attributes,
            near_misses=near_misses,
            goal_option_rate=goal_option_rate,
            item_page_options=item_page_options,
        )
        catalog = get_catalog(num_products, catalog_seed, goals_per_product, cache_dir, knobs)
        self._setup(catalog, split, max_steps)

    @staticmethod
    def _check(split: str, max_steps: int) -> None:
        if split not in ("train", "test", "all"):
            raise ValueError(f"split must be 'train', 'test' or 'all', not {split!r}")
        if max_steps < 1:
            raise ValueError("max_steps must be >= 1")

    def _setup(self, catalog: Catalog, split: str, max_steps: int) -> None:
        self.split = split
        self.max_steps = max_steps
        self.catalog: Catalog = catalog
        g = self.catalog.goals
        self.goals: list[Goal] = g["test"] + g["train"] if split == "all" else g[split]
        self._goal: Goal | None = None
        self._state = PageState()
        self._results: tuple[str, ...] = ()
        self._steps = 0
        self._done = True
        #: Reward components of the last purchase (r_type, r_att, r_option, r_price, title_score, ...).
        self.last_reward_info: dict[str, Any] = {}

    # --- public read-only views (the oracle policy and tests use them) ---
    @property
    def goal(self) -> Goal:
        if self._goal is None:
            raise EnvError("call reset() first")
        return self._goal

    @property
    def page(self) -> PageState:
        return self._state

    @property
    def results(self) -> tuple[str, ...]:
        """ASINs of the last search, best first (at most 50)."""
        return self._results

    @property
    def done(self) -> bool:
        return self._done

    def product(self, asin: str) -> Product:
        return self.catalog.by_asin[asin.upper()]

    def clickables(self) -> list[str]:
        s = self._state
        return clickables(s, self._results, self.catalog.by_asin.get(s.asin))

    # --- Env contract ---
    def reset(self, seed: int) -> tuple[str, dict[str, Any]]:
        self._goal = self.goals[int(seed) % len(self.goals)]
        self._state = PageState()
        self._results = ()
        self._steps = 0
        self._done = False
        self.last_reward_info = {}
        info = self._info(valid=True, score=0.0)
        return self._render(), info

    def step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        if self._goal is None:
            raise EnvError("call reset() before step()")
        if self._done:
            raise EnvError("the episode is over; call reset()")
        self._steps += 1
        error = self._apply(action)
        score = 0.0
        if self._state.kind == "done":
            score = self._purchase_score()
            self._done = True
        elif self._steps >= self.max_steps:
            self._done = True
        obs = self._render(score)
        if error is not None:
            obs = f"Invalid action: {error}\n{obs}"
        info = self._info(valid=error is None, score=score)
        info["truncated"] = self._done and self._state.kind != "done"
        return obs, score, self._done, info

    # --- internals ---
    def _apply(self, action: str) -> str | None:
        """Move to the next page; return a reason string when the action is invalid (state unchanged)."""
        m = _ACTION.match(action if isinstance(action, str) else "")
        if m is None:
            return f"{action!r} is not an action; use search[keywords] or click[button]."
        name, arg = m.group(1).lower(), m.group(2).strip().lower()
        s = self._state
        if name == "search":
            if s.kind != "search":
                return f"there is no search box on this page; use click[{BACK_TO_SEARCH.lower()}] first."
            query = " ".join(arg.split())
            if not query:
                return "the search query is empty."
            self._results = self.catalog.index.search(query)
            self._state = PageState("results", query, 1)
            return None
        if name != "click":
            return f"unknown action {name!r}; use search[keywords] or click[button]."
        if not arg:
            return "click[] needs a button, product ID or option from the page."
        if arg == "search":
            return "type a query with search[keywords] instead of clicking Search."
        if arg not in self.clickables():
            return f"{arg!r} is not clickable on this page."
        self._state = self._click(arg)
        return None

    def _click(self, arg: str) -> PageState:
        s = self._state
        if arg == BACK_TO_SEARCH.lower():
            self._results = ()
            return PageState()
        if s.kind == "results":
            if arg == NEXT_PAGE.lower():
                return replace(s, page=s.page + 1)
            if arg == PREV_PAGE.lower():
                return replace(s, page=s.page - 1)
            return replace(s, kind="item", asin=arg.upper(), options=())  # a product link
        if s.kind == "item":
            if arg == PREV_PAGE.lower():
                return replace(s, kind="results", asin="", options=())
            if arg == "buy now":
                return replace(s, kind="done")
            if arg in ("description", "features", "reviews"):
                return replace(s, kind=arg)
            chosen = dict(s.options)
            for opt_name, values in self.product(s.asin)["options"].items():
                if arg in values:
                    chosen[opt_name] = arg
            return replace(s, options=tuple(sorted(chosen.items())))
        # A sub-page (description / features / reviews): "< Prev" returns to the item page, options kept.
        return replace(s, kind="item")

    def _purchase_score(self) -> float:
        s = self._state
        p = self.product(s.asin)
        score, self.last_reward_info = get_reward(p, self.goal, p["price"], dict(s.options))
        return score

    def _render(self, score: float | None = None) -> str:
        return render(self._state, self.goal["instruction_text"], self._results, self.catalog.by_asin, score)

    def _info(self, *, valid: bool, score: float) -> dict[str, Any]:
        clicks = [] if self._done else self.clickables()
        has_search = self._state.kind == "search" and not self._done
        admissible = ([SEARCH_HINT] if has_search else []) + [f"click[{c}]" for c in clicks if c != "search"]
        return {
            "task": self.goal["instruction_text"],
            "state_key": self._state.key(),
            "admissible_actions": admissible,
            "available_actions": {"has_search_bar": has_search, "clickables": clicks},
            "won": self._done and math.isclose(score, 1.0),
            "score": score,
            "action_valid": valid,
            "steps": self._steps,
        }


class OriginalWebShopEnv(WebShopEnv):
    """The same env over WebShop's own products and human goals (``webshop-original``; see webshop/original.py).

    ``data_dir``: the folder WebShop's setup.sh fills (default ``$GIGPO_WEBSHOP_DATA``); ``num_products``: the
    first N products of the (shuffled) product file, None for all of it; ``seed``: prices, budgets and the goal
    shuffle. Splits: ``test`` = the first 500 shuffled goals, ``train`` = the rest, ``all`` = both.
    """

    def __init__(
        self,
        *,
        data_dir: str | os.PathLike[str] | None = None,
        split: str = "train",
        num_products: int | None = 1000,
        seed: int = 233,
        max_steps: int = 15,
    ) -> None:
        from gigpo.envs.webshop.original import get_original_catalog

        self._check(split, max_steps)
        if num_products is not None and num_products < 1:
            raise ValueError("num_products must be >= 1 (or None for every product)")
        self._setup(get_original_catalog(data_dir, num_products, seed), split, max_steps)
