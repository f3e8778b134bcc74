-- The version each gateway reports in its heartbeats, shown in GET /api/v1/gateways.
ALTER TABLE gateways ADD COLUMN version TEXT;
