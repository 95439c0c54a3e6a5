"""Agent side of the loop: per-step prompt building and response -> action parsing. Knows tokenizers, not models."""

from gigpo.agent.parse import ParsedAction, parse_response
from gigpo.agent.prompt import PromptBuilder, build_messages

__all__ = ["ParsedAction", "PromptBuilder", "build_messages", "parse_response"]
