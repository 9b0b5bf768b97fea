"""Test doubles that exercise the real client path: a loopback OpenAI-compatible server with fault modes."""

from scijudge.testing.openai_server import (
    CONTENT_FILTER,
    Fault,
    Hang,
    Html,
    OpenAICompatServer,
    Reply,
    closed_port_url,
    fail_json_schema,
    refuse_prompts_with,
)

__all__ = ["CONTENT_FILTER", "Fault", "Hang", "Html", "OpenAICompatServer", "Reply", "closed_port_url",
           "fail_json_schema", "refuse_prompts_with"]
