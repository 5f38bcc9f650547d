"""Agent tools (LangChain tool schema) that wrap simulators and perception for policies."""
