"""LangGraph agent graphs (explorer, csmr, proactive, sxs) built on embodia's simulators."""
