"""Prompting baselines and serving: OpenAI-compatible API models as agents, and trained agents behind that API.

Names load on first access (module ``__getattr__``), so ``from gigpo.serve import ChatClient`` (:mod:`gigpo.apiclient`) — what an
env's LLM user needs — imports no torch and no model code.
"""

from importlib import import_module
from typing import Any

_WHERE = {
    "ChatPromptBuilder": "chat_prompt",
    "APIConnectionError": "client", "APIError": "client", "ChatClient": "client", "Usage": "client",
    "OpenAIEngine": "engine",
    "EpisodeResult": "evaluate_api", "eval_api_main": "evaluate_api", "run_api_evaluation": "evaluate_api",
    "run_episode": "evaluate_api", "summarize": "evaluate_api",
    "make_server": "server", "serve_main": "server",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'gigpo.serve' has no attribute {name!r}")
    return getattr(import_module(f"gigpo.serve.{_WHERE[name]}"), name)
