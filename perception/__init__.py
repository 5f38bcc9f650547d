"""Perception: 360-BEV mapping, waypoints, regions and the perception modules agents call."""
