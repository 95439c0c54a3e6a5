"""Offline WebShop-style shopping env: generated catalog, WebShop's pages, actions and reward (see docs/envs/webshop.md)."""

from gigpo.envs.webshop.catalog import get_catalog, load_or_build
from gigpo.envs.webshop.env import OriginalWebShopEnv, WebShopEnv
from gigpo.envs.webshop.policies import oracle_action, random_action
from gigpo.envs.webshop.reward import get_reward

__all__ = ["OriginalWebShopEnv", "WebShopEnv", "get_catalog", "get_reward", "load_or_build", "oracle_action", "random_action"]
