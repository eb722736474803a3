package dev.hyspec.tokenizer;

import java.util.Arrays;
import java.util.Objects;

/**
 * Turns generated token ids, given one at a time, into text deltas for streaming, the way vLLM's
 * incremental detokenizer does.
 *
 * <p>Each {@link #add} decodes a short window of recent tokens twice, with and without the tokens
 * not yet shown, and returns the difference. While the window's text ends in U+FFFD (a multi-byte
 * character whose bytes are split across tokens, e.g. byte-level BPE or byte-fallback pieces), the
 * text is held back until a later token completes it. Decoding a window rather than single tokens
 * keeps the spaces that decoders such as SentencePiece's Metaspace strip from the start of a text.
 *
 * <p>Started without a prompt, the concatenation of every delta and of {@link #flush()} equals
 * {@link Tokenizer#decode(int[], boolean)} of all the ids added. Started with a prompt, its last
 * few tokens are the left context of the first window, so the first delta keeps a leading space
 * that decoding the generated ids alone would strip.
 *
 * <p>One instance serves one sequence and is not thread-safe.
 */
public final class IncrementalDecoder {
    /** How many prompt tokens serve as left context, as vLLM's INITIAL_INCREMENTAL_DETOKENIZATION_OFFSET. */
    static final int PROMPT_CONTEXT_TOKENS = 5;

    private static final char REPLACEMENT = '\uFFFD';

    private final Tokenizer tokenizer;
    private final boolean skipSpecialTokens;
    private int[] tokens;
    private int size;
    // tokens[prefixOffset, readOffset) were shown already and are decoded again as left context;
    // tokens[readOffset, size) are not shown yet.
    private int prefixOffset;
    private int readOffset;

    /** A decoder for a sequence that starts with no left context. */
    public IncrementalDecoder(Tokenizer tokenizer, boolean skipSpecialTokens) {
        this(tokenizer, new int[0], skipSpecialTokens);
    }

    /**
     * A decoder for tokens generated after {@code promptIds}, whose last
     * {@value #PROMPT_CONTEXT_TOKENS} tokens give the first generated token its left context; the
     * prompt's own text is never returned.
     */
    public IncrementalDecoder(Tokenizer tokenizer, int[] promptIds, boolean skipSpecialTokens) {
        this.tokenizer = Objects.requireNonNull(tokenizer, "tokenizer");
        this.skipSpecialTokens = skipSpecialTokens;
        int context = Math.min(promptIds.length, PROMPT_CONTEXT_TOKENS);
        this.tokens = new int[Math.max(16, context * 2)];
        System.arraycopy(promptIds, promptIds.length - context, tokens, 0, context);
        this.size = context;
        this.prefixOffset = 0;
        this.readOffset = context;
    }

    /**
     * Appends {@code tokenId} and returns the text it completes: possibly empty (nothing new, or a
     * multi-byte character still incomplete), possibly more than this token's own text (when it
     * completes text held back before).
     */
    public String add(int tokenId) {
        if (size == tokens.length) {
            compact();
        }
        tokens[size++] = tokenId;
        return delta(false);
    }

    /**
     * Returns the text held back at the end of the sequence, such as an incomplete multi-byte
     * character (as U+FFFD, the way a full decode shows it); call it once the sequence ends.
     */
    public String flush() {
        return delta(true);
    }

    private String delta(boolean force) {
        if (readOffset == size) {
            return "";
        }
        String prefix = tokenizer.decode(tokens, prefixOffset, readOffset, skipSpecialTokens);
        String text = tokenizer.decode(tokens, prefixOffset, size, skipSpecialTokens);
        boolean incomplete = !text.isEmpty() && text.charAt(text.length() - 1) == REPLACEMENT;
        if (text.length() <= prefix.length() || (incomplete && !force)) {
            if (force) {
                readOffset = size;
            }
            return "";
        }
        prefixOffset = readOffset;
        readOffset = size;
        // Decoding is not always prefix-stable (a decoder may rewrite the window's start); as vLLM,
        // the characters past the old text's length are the delta.
        return text.substring(prefix.length());
    }

    private void compact() {
        if (prefixOffset > 0) {
            System.arraycopy(tokens, prefixOffset, tokens, 0, size - prefixOffset);
            size -= prefixOffset;
            readOffset -= prefixOffset;
            prefixOffset = 0;
        }
        if (size == tokens.length) {
            tokens = Arrays.copyOf(tokens, tokens.length * 2);
        }
    }
}
