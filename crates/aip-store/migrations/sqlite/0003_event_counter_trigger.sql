-- An event insert takes its sequences from the counter inside the same statement (one statement per
-- batch of events instead of a counter update and then an insert); this trigger moves the counter
-- past every inserted sequence, so sequences still never repeat, even after events are deleted.
CREATE TRIGGER aip_events_advance_counter AFTER INSERT ON aip_events
BEGIN
    UPDATE aip_counters SET value = NEW.seq WHERE name = 'events' AND value < NEW.seq;
END;
