"""Build the configured client from :class:`pcm.settings.Settings` (the only place that maps settings to clients)."""

from __future__ import annotations

from pcm.errors import LLMError, UsageError
from pcm.llm.anthropic_client import AnthropicClient
from pcm.llm.base import LLMClient
from pcm.llm.openai_client import OpenAICompatibleClient
from pcm.llm.scripted import ScriptedClient
from pcm.settings import DEFAULT_ANTHROPIC_MODEL, Settings


def make_client(settings: Settings) -> LLMClient | None:
    """The client ``settings.llm`` names, or ``None`` for ``none`` (episodic mode: pcm runs without a model)."""
    spec = settings.llm
    if spec.provider == "none":
        return None
    if spec.provider == "anthropic":
        return AnthropicClient(
            api_key=settings.anthropic_api_key,
            model=spec.model or DEFAULT_ANTHROPIC_MODEL,
            timeout=settings.llm_timeout,
            max_retries=settings.llm_max_retries,
            base_url=spec.base_url or settings.anthropic_base_url or None,
        )
    if spec.provider == "openai":
        return OpenAICompatibleClient(
            base_url=spec.base_url,
            model=spec.model,
            api_key=settings.openai_api_key,
            timeout=settings.llm_timeout,
            max_retries=settings.llm_max_retries,
        )
    if spec.provider == "llamacpp":
        from pcm.llm.llamacpp_client import LlamaCppClient

        return LlamaCppClient(model_path=spec.model, threads=settings.llm_threads, context=settings.llm_context,
                              fast_grammar=settings.llm_fast_grammar, prompt_cache_mb=settings.llm_prompt_cache_mb,
                              state_dir=settings.llm_state_dir, draft=settings.llm_draft)
    if spec.provider == "scripted":
        if not spec.model:
            raise LLMError("PCM_LLM=scripted needs a file of replies: scripted:PATH (a JSON list of strings)")
        return ScriptedClient.from_file(spec.model)
    if spec.provider == "replay":
        from pcm.llm.record import ReplayClient

        return ReplayClient(spec.model)
    raise UsageError(f"unknown LLM provider {spec.provider!r}: expected none, anthropic, openai, llamacpp, scripted or replay")
