"""Business units: organisational entities with strategy, services, pricing and projections."""
