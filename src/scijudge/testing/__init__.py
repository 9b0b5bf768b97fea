"""Test doubles that exercise the real client path: a loopback OpenAI-compatible server."""

from scijudge.testing.openai_server import Fault, OpenAICompatServer, Reply

__all__ = ["Fault", "OpenAICompatServer", "Reply"]
