"""Component registry: versioned, byte-for-byte backups of agents, skills, hooks and plugins."""
