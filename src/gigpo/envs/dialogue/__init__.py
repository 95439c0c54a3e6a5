"""Multi-turn dialogue envs: the agent talks with a simulated user (``rules`` templates or any OpenAI-compatible
LLM); see docs/envs/dialogue.md."""

from gigpo.envs.dialogue.base import DialogueEnv, Outcome
from gigpo.envs.dialogue.booking import BookingEnv
from gigpo.envs.dialogue.guess import GuessEnv
from gigpo.envs.dialogue.text import EMPTY_MARKER, TRUNCATION_MARKER, Intent, clean_reply, parse_intent
from gigpo.envs.dialogue.users import LLMUser, RulesUser, make_user

__all__ = ["EMPTY_MARKER", "TRUNCATION_MARKER", "BookingEnv", "DialogueEnv", "GuessEnv", "Intent", "LLMUser",
           "Outcome", "RulesUser", "clean_reply", "make_user", "parse_intent"]
