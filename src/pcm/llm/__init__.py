"""LLM clients behind one small protocol: Anthropic, any OpenAI-compatible server, and a scripted test double.

Callers depend on :class:`LLMClient` only and get one from :func:`make_client`; every call names its *operation*
(``"extract"``, ``"repair"``, ``"nl2sparql"``, ``"answer"``, ``"judge"``) so usage is counted per pipeline stage.
"""

from pcm.llm.anthropic_client import AnthropicClient
from pcm.llm.base import Completion, LLMClient, Message, Request, Usage
from pcm.llm.factory import make_client
from pcm.llm.openai_client import OpenAICompatibleClient
from pcm.llm.scripted import ScriptedClient

__all__ = [
    "AnthropicClient",
    "Completion",
    "LLMClient",
    "Message",
    "OpenAICompatibleClient",
    "Request",
    "ScriptedClient",
    "Usage",
    "make_client",
]
