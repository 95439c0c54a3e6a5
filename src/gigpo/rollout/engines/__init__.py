"""The built-in rollout engines, each registered in the module that defines it (:mod:`gigpo.rollout.registry`):
``hf`` (:mod:`.hf`: Hugging Face generate on the learner's own model; :mod:`.hf_worker` is its ``rollout.async``
worker process), ``openai`` (:mod:`.openai`: OpenAI-compatible completions servers — gigpo serve or vLLM —
with :mod:`.weight_push` pushing weights to them) and ``vllm`` (:mod:`.vllm`: an in-process ``vllm.LLM``;
:mod:`.vllm_choice` is constrained decoding over vLLM, for both).

Importing this package registers them and re-exports the contract and registry, so ``from gigpo.rollout.engines
import register_engine`` is where a user's engine starts. A new built-in engine is one new module here, imported
below; a user's engine lives in their own module, loaded with ``--import MODULE``. Nothing here imports torch
until an engine is built.
"""

from gigpo.rollout.engines import hf, openai, vllm  # noqa: F401  (each registers its engine)
from gigpo.rollout.registry import (
    ENGINES,
    Capabilities,
    Engine,
    EngineError,
    EngineSpec,
    Generation,
    RemoteEngineError,
    StaleWeightsError,
    create_engine,
    engine_class,
    engine_spec,
    register_engine,
    registered_engines,
)

__all__ = ["ENGINES", "Capabilities", "Engine", "EngineError", "EngineSpec", "Generation", "RemoteEngineError",
           "StaleWeightsError", "create_engine", "engine_class", "engine_spec", "register_engine",
           "registered_engines"]
