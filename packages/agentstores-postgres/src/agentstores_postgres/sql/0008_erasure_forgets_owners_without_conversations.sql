-- Erasure forgets an owner who has no conversation left: conv_erase removes the owner's
-- owner_counts row with their last conversation (it used to keep a row counting 0 for
-- good, so the owner's id stayed after everything of theirs was erased). The rows
-- earlier erasures left at 0 go here.
DELETE FROM __S__.owner_counts WHERE conversations <= 0;
