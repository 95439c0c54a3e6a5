"""Where the API client used to live: :mod:`gigpo.apiclient` (moved out of ``serve`` so that ``rollout``, ``envs``
and ``train`` can use it without depending on the serving package). Old imports keep working."""

from gigpo.apiclient import RETRYABLE_STATUS, APIConnectionError, APIError, ChatClient, Usage  # noqa: F401
