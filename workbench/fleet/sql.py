"""SQL and names of a shared study's PostgreSQL tables: Optuna's schema, the claims table,
the advisory locks and the queries workers run each round."""

from __future__ import annotations

import enum
from typing import TypeVar

import optuna

optuna.logging.set_verbosity(optuna.logging.WARNING)

#: PostgreSQL schema of Optuna's tables (the store's tables stay in ``public``).
OPTUNA_SCHEMA = "optuna"
#: Trial system attributes.
CLAIM = "workbench:claim"  #: the worker holding a budget slot for it ("store": seeded)
SKIPPED = "workbench:skipped"  #: why a trial was pruned without a measurement
#: Study user attributes.
SPEC = "workbench:spec"  #: what the study tunes (a worker needs nothing else)
DEVICE_CLASS = "workbench:device_class"
#: Study system attributes, one per worker: its host, pid, GPU and when it was last seen.
PRESENCE = "workbench:worker:"
#: Advisory lock key for setting up studies (schema, tables, store rows): "wbsetup".
SETUP_LOCK = 0x7762736574757000
#: Advisory lock key for creating the claims table and its functions (apart from SETUP_LOCK,
#: which callers may hold on another connection while they open the storage): "wbddl".
DDL_LOCK = 0x7762646466000000
#: Class of the per-study claim locks, ``pg_advisory_xact_lock(CLAIM_LOCK_CLASS, study_id)``.
CLAIM_LOCK_CLASS = 0x7762

# The claims: one row per (study, config key); ``done`` orders completions (what workers read
# since their last read). Functions run in one round trip each; PL/pgSQL takes a new snapshot
# per statement, so what the claim reads after taking the lock includes every earlier claim.
CLAIMS_DDL = f"""
CREATE SEQUENCE IF NOT EXISTS {OPTUNA_SCHEMA}.workbench_claim_seq;
CREATE TABLE IF NOT EXISTS {OPTUNA_SCHEMA}.workbench_claims (
    study_id integer NOT NULL,
    config_key text NOT NULL,
    params text NOT NULL,
    worker text NOT NULL,
    claim_id bigint NOT NULL,
    trial_id integer,
    claimed_at timestamptz NOT NULL,
    value double precision,
    done bigint,
    outcome text,
    reason text,
    PRIMARY KEY (study_id, config_key)
);
CREATE INDEX IF NOT EXISTS workbench_claims_done
    ON {OPTUNA_SCHEMA}.workbench_claims (study_id, done);
-- a failed config's outcome and reason (a table made before they were kept lacks them)
ALTER TABLE {OPTUNA_SCHEMA}.workbench_claims ADD COLUMN IF NOT EXISTS outcome text,
    ADD COLUMN IF NOT EXISTS reason text;

-- 'complete', 'running' or 'dead': a claim lives while its trial is RUNNING or COMPLETE, or,
-- before its trial exists, for the grace period
CREATE OR REPLACE FUNCTION {OPTUNA_SCHEMA}.workbench_claim_state(
    p_trial integer, p_claimed timestamptz, p_done bigint, p_grace double precision
) RETURNS text LANGUAGE sql VOLATILE AS $$
    SELECT CASE
        WHEN p_done IS NOT NULL THEN 'complete'
        WHEN p_trial IS NULL THEN CASE
            WHEN p_claimed > clock_timestamp() - make_interval(secs => p_grace) THEN 'running'
            ELSE 'dead' END
        ELSE coalesce((
            SELECT CASE t.state::text WHEN 'RUNNING' THEN 'running'
                WHEN 'COMPLETE' THEN 'complete' ELSE 'dead' END
            FROM {OPTUNA_SCHEMA}.trials t WHERE t.trial_id = p_trial), 'dead')
    END
$$;

-- claim p_key for p_worker (with its trial p_trial if it exists already: a re-queued one):
-- 'ok' (and the claim id), 'reclaimed' (ok, in place of a dead claim: its worker may have
-- stored a result), 'duplicate' (a live claim has the key) or 'surplus' (no slot)
CREATE OR REPLACE FUNCTION {OPTUNA_SCHEMA}.workbench_claim(
    p_study integer, p_key text, p_params text, p_worker text, p_budget integer,
    p_trial integer, p_grace double precision
) RETURNS TABLE (outcome text, claim bigint) LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    c {OPTUNA_SCHEMA}.workbench_claims%ROWTYPE;
    live bigint;
    id bigint;
    outcome text := 'ok';
BEGIN
    PERFORM pg_advisory_xact_lock({CLAIM_LOCK_CLASS}, p_study);
    SELECT * INTO c FROM {OPTUNA_SCHEMA}.workbench_claims
        WHERE study_id = p_study AND config_key = p_key;
    IF FOUND AND {OPTUNA_SCHEMA}.workbench_claim_state(c.trial_id, c.claimed_at, c.done, p_grace)
            <> 'dead' THEN
        -- the same claim again (a retry after the reply was lost) is still this worker's
        IF c.worker = p_worker AND c.done IS NULL
                AND (c.trial_id IS NULL OR c.trial_id = p_trial) THEN
            RETURN QUERY SELECT 'ok'::text, c.claim_id;
        ELSE
            RETURN QUERY SELECT 'duplicate'::text, NULL::bigint;
        END IF;
        RETURN;
    END IF;
    IF FOUND THEN
        outcome := 'reclaimed';
    END IF;
    IF p_budget IS NOT NULL THEN
        SELECT count(*) INTO live FROM {OPTUNA_SCHEMA}.workbench_claims w
            WHERE w.study_id = p_study AND (w.done IS NOT NULL OR
                {OPTUNA_SCHEMA}.workbench_claim_state(w.trial_id, w.claimed_at, NULL, p_grace)
                <> 'dead');
        IF live >= p_budget THEN
            RETURN QUERY SELECT 'surplus'::text, NULL::bigint;
            RETURN;
        END IF;
    END IF;
    id := nextval('{OPTUNA_SCHEMA}.workbench_claim_seq');
    INSERT INTO {OPTUNA_SCHEMA}.workbench_claims AS w
        (study_id, config_key, params, worker, claim_id, trial_id, claimed_at)
        VALUES (p_study, p_key, p_params, p_worker, id, p_trial, clock_timestamp())
        ON CONFLICT (study_id, config_key) DO UPDATE SET params = EXCLUDED.params,
            worker = EXCLUDED.worker, claim_id = EXCLUDED.claim_id,
            trial_id = EXCLUDED.trial_id, claimed_at = EXCLUDED.claimed_at,
            value = NULL, done = NULL, outcome = NULL, reason = NULL;
    RETURN QUERY SELECT outcome, id;
END
$$;

-- give claim p_claim its new trial; false when the claim expired meanwhile (the trial is then
-- skipped: another worker may have the slot or the key)
CREATE OR REPLACE FUNCTION {OPTUNA_SCHEMA}.workbench_link(
    p_study integer, p_key text, p_claim bigint, p_trial integer, p_grace double precision
) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock({CLAIM_LOCK_CLASS}, p_study);
    UPDATE {OPTUNA_SCHEMA}.workbench_claims SET trial_id = p_trial
        WHERE study_id = p_study AND config_key = p_key AND claim_id = p_claim
        AND (trial_id = p_trial OR (trial_id IS NULL
            AND claimed_at > clock_timestamp() - make_interval(secs => p_grace)));
    RETURN FOUND;
END
$$;
"""

# What a worker reads each round (see :meth:`SharedStudy.progress`).
PROGRESS_SQL = f"""
WITH c AS (
    SELECT config_key, params, value, done, outcome, reason,
        {OPTUNA_SCHEMA}.workbench_claim_state(trial_id, claimed_at, done, :grace) AS st
    FROM {OPTUNA_SCHEMA}.workbench_claims WHERE study_id = :study
)
SELECT 'done' AS kind, config_key, params, value, done AS n, outcome, reason
    FROM c WHERE done > :since
UNION ALL SELECT 'flight', config_key, params, NULL, NULL, NULL, NULL FROM c WHERE st = 'running'
UNION ALL SELECT 'complete', NULL, NULL, NULL, count(*), NULL, NULL FROM c WHERE st = 'complete'
UNION ALL SELECT 'live', NULL, NULL, NULL, count(*), NULL, NULL FROM c WHERE st <> 'dead'
UNION ALL SELECT 'waiting', NULL, NULL, NULL, trial_id, NULL, NULL FROM {OPTUNA_SCHEMA}.trials
    WHERE study_id = :study AND state::text = 'WAITING'
"""

T = TypeVar("T")


class Skip(enum.Enum):
    """Why a trial ends PRUNED without being measured (it never counts against the budget)."""

    DUPLICATE = "duplicate"  #: another live claimed trial has the same config
    SURPLUS = "surplus"  #: the budget's slots were all taken when it tried to claim one
    INFEASIBLE = "infeasible"  #: the runner rejects the config (absent from a recording)
    RELEASED = "released"  #: its worker stopped (Ctrl-C) before measuring it


#: RUNNING trials of a study that have no heartbeat (see SharedStudy.fail_stale).
UNBEATEN_SQL = f"""
SELECT t.trial_id FROM {OPTUNA_SCHEMA}.trials t
WHERE t.study_id = :study AND t.state::text = 'RUNNING'
    AND NOT EXISTS (SELECT 1 FROM {OPTUNA_SCHEMA}.trial_heartbeats h WHERE h.trial_id = t.trial_id)
"""
