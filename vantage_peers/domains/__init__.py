"""Domain packages: one per capability, each with models/store/tools."""
