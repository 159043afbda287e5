"""Episodes: structured event records stored as memories of type `episode`."""
