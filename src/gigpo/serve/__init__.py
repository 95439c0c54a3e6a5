"""Prompting baselines and serving: OpenAI-compatible API models as agents, and trained agents behind that API."""

from gigpo.serve.chat_prompt import ChatPromptBuilder
from gigpo.serve.client import APIConnectionError, APIError, ChatClient, Usage
from gigpo.serve.engine import OpenAIEngine
from gigpo.serve.evaluate_api import EpisodeResult, eval_api_main, run_api_evaluation, run_episode, summarize
from gigpo.serve.server import make_server, serve_main

__all__ = [
    "APIConnectionError", "APIError", "ChatClient", "ChatPromptBuilder", "EpisodeResult", "OpenAIEngine", "Usage",
    "eval_api_main", "make_server", "run_api_evaluation", "run_episode", "serve_main", "summarize",
]
