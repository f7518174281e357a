-- Placeholder: this number belongs to a migration of another branch (issue 19
-- work in parallel); the house branch's migration is numbered after it.
-- Delete this file when that branch's migration of the same number merges.
-- Until then it changes nothing (a table made and dropped at once).
CREATE TABLE reserved_009 (x INTEGER);
DROP TABLE reserved_009;
