-- Webhook delivery: pausing or deleting an endpoint drops its waiting calls; find them without
-- scanning the endpoint's whole delivery log.
CREATE INDEX webhook_conversations_waiting ON webhook_conversations (endpoint_id)
  WHERE status IN ('pending', 'retrying');
