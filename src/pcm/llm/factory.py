"""Build the configured client from :class:`pcm.settings.Settings` (the only place that maps settings to clients).

:data:`PROVIDERS` is the one table of providers: a new client is one function and one row.
"""

from __future__ import annotations

from collections.abc import Callable

from pcm.errors import LLMError, UsageError
from pcm.llm.anthropic_client import AnthropicClient
from pcm.llm.base import LLMClient
from pcm.llm.openai_client import OpenAICompatibleClient
from pcm.llm.scripted import ScriptedClient
from pcm.settings import DEFAULT_ANTHROPIC_MODEL, Settings


def _anthropic(settings: Settings) -> LLMClient:
    spec = settings.llm
    return AnthropicClient(
        api_key=settings.anthropic_api_key,
        model=spec.model or DEFAULT_ANTHROPIC_MODEL,
        timeout=settings.llm_timeout,
        max_retries=settings.llm_max_retries,
        base_url=spec.base_url or settings.anthropic_base_url or None,
    )


def _openai(settings: Settings) -> LLMClient:
    spec = settings.llm
    return OpenAICompatibleClient(
        base_url=spec.base_url,
        model=spec.model,
        api_key=settings.openai_api_key,
        timeout=settings.llm_timeout,
        max_retries=settings.llm_max_retries,
    )


def _llamacpp(settings: Settings) -> LLMClient:
    # llama-cpp-python is an optional extra, imported only when a local model is configured
    from pcm.llm.llamacpp_client import LlamaCppClient

    return LlamaCppClient(model_path=settings.llm.model, threads=settings.llm_threads, context=settings.llm_context,
                          fast_grammar=settings.llm_fast_grammar, prompt_cache_mb=settings.llm_prompt_cache_mb,
                          state_dir=settings.llm_state_dir, draft=settings.llm_draft)


def _scripted(settings: Settings) -> LLMClient:
    if not settings.llm.model:
        raise LLMError("PCM_LLM=scripted needs a file of replies: scripted:PATH (a JSON list of strings)")
    return ScriptedClient.from_file(settings.llm.model)


def _replay(settings: Settings) -> LLMClient:
    from pcm.llm.record import ReplayClient

    return ReplayClient(settings.llm.model)


#: Every provider ``PCM_LLM`` may name (``none`` aside), and the function that builds its client.
PROVIDERS: dict[str, Callable[[Settings], LLMClient]] = {
    "anthropic": _anthropic,
    "openai": _openai,
    "llamacpp": _llamacpp,
    "scripted": _scripted,
    "replay": _replay,
}


def make_client(settings: Settings) -> LLMClient | None:
    """The client ``settings.llm`` names, or ``None`` for ``none`` (episodic mode: pcm runs without a model)."""
    provider = settings.llm.provider
    if provider == "none":
        return None
    build = PROVIDERS.get(provider)
    if build is None:
        raise UsageError(f"unknown LLM provider {provider!r}: expected none, {', '.join(PROVIDERS)}")
    return build(settings)
