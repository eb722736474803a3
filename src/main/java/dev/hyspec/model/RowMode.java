package dev.hyspec.model;

/**
 * What a batch row does to its sequence's recurrent state. {@code PREFILL}: a chunk of tokens that
 * are all committed, advanced in place. {@code GENERATE}: the last sampled token plus any drafts,
 * run through the row's rollback strategy so the verifier can keep any prefix of it.
 */
public enum RowMode {
    PREFILL,
    GENERATE
}
