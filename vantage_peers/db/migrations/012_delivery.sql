-- Version 12: acknowledgements, redelivery and dead letters on message receipts (docs/delivery.md).
-- A receipt moves delivered (the row exists) -> read (readAt) -> acknowledged (ackedAt).
-- Redelivery and dead-lettering are single compare-and-set UPDATEs on nextDeliveryAt, run by the
-- scheduler in any process: a receipt matched by one process no longer matches for another.
ALTER TABLE messageReceipts ADD COLUMN ackRequired INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messageReceipts ADD COLUMN ackTimeoutMs INTEGER;       -- first wait before a redelivery
ALTER TABLE messageReceipts ADD COLUMN ackedAt INTEGER;
ALTER TABLE messageReceipts ADD COLUMN ackNote TEXT;
ALTER TABLE messageReceipts ADD COLUMN ackedBy TEXT;               -- the recipient, or `system`
ALTER TABLE messageReceipts ADD COLUMN deliveryAttempt INTEGER NOT NULL DEFAULT 1;
ALTER TABLE messageReceipts ADD COLUMN redeliveredAt INTEGER;      -- last redelivery (wake-ups key on it)
ALTER TABLE messageReceipts ADD COLUMN nextDeliveryAt INTEGER;     -- NULL = nothing pending
ALTER TABLE messageReceipts ADD COLUMN deadLetteredAt INTEGER;
ALTER TABLE messageReceipts ADD COLUMN staleAtSend INTEGER NOT NULL DEFAULT 0; -- broadcast skipped the wait

-- The redelivery job reads only receipts still waiting for an acknowledgement, by due time.
CREATE INDEX receipts_ack_due ON messageReceipts (nextDeliveryAt) WHERE nextDeliveryAt IS NOT NULL;
