-- Up Migration
-- Invitations are matched to a person by email, but an email address proves nothing by itself:
-- with console sign-up open anyone can create an account with any address (nothing is mailed, so
-- nothing is verified), sign up as an invited address and accept what was meant for its owner.
--
-- users.email_verified: whether someone vouches for the address. Users an operator creates
-- (`npm run admin -- user create`, the dev user) are verified; console sign-ups are not. Rows that
-- exist now are not: nothing records who created them (sign-up and the operator command write the
-- same row), and guessing wrong would let a sign-up squatting an address keep accepting invitations
-- to it. Such a user accepts an invitation with its link, like any sign-up.
--
-- member_invitations.token_hash: the SHA-256 of the invitation link's secret (32 random bytes),
-- shown once to whoever invites; sending again replaces it, so an older link stops working. An
-- unverified user accepts only with the link. Invitations pending now have none: their inviter
-- invites the address again to get a link (verified users can still accept them as before).
-- Both columns default so that an API process of the previous release, still running while a
-- deployment migrates, writes unverified users and invitations without a link.
ALTER TABLE users ADD COLUMN email_verified boolean NOT NULL DEFAULT false;
ALTER TABLE member_invitations ADD COLUMN token_hash bytea CHECK (octet_length(token_hash) = 32);

-- Down Migration
ALTER TABLE member_invitations DROP COLUMN token_hash;
ALTER TABLE users DROP COLUMN email_verified;
