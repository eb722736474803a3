package dev.hyspec.sampling;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * Per-request sampling parameters, following vLLM's {@code SamplingParams} (names in camelCase).
 *
 * <p>The record does not validate itself on construction, so a caller (the HTTP layer) can build
 * one from user input and call {@link #validate()} to turn a bad value into a 400 with a message
 * that names the offending field.
 *
 * @param temperature  softmax temperature; below {@link #SAMPLING_EPS} (in particular {@code 0})
 *                     the request is greedy, as in vLLM
 * @param topP         nucleus mass in {@code (0, 1]}; {@code 1} disables top-p
 * @param topK         number of highest logits kept; {@code 0} or {@code -1} disables top-k
 * @param seed         seed of the request's own generator; {@code null} means a random seed
 * @param maxTokens    maximum number of tokens to generate, at least 1
 * @param stopTokenIds token ids that end generation (besides EOS unless {@code ignoreEos});
 *                     {@code null} is read as empty, the list is copied
 * @param ignoreEos    keep generating after EOS
 */
public record SamplingParams(
        double temperature,
        double topP,
        int topK,
        Long seed,
        int maxTokens,
        List<Integer> stopTokenIds,
        boolean ignoreEos) {

    /** Temperatures below this are treated as greedy (vLLM's {@code _SAMPLING_EPS}). */
    public static final double SAMPLING_EPS = 1e-5;

    /** OpenAI's / vLLM's default {@code max_tokens} when a request names none. */
    public static final int DEFAULT_MAX_TOKENS = 16;

    public SamplingParams {
        // Not List.copyOf: it throws a bare NullPointerException on a null element, and
        // validate() should be the one to reject it, naming the field.
        stopTokenIds = stopTokenIds == null
                ? List.of()
                : Collections.unmodifiableList(new ArrayList<>(stopTokenIds));
    }

    /** Greedy decoding (temperature 0, no top-k/top-p, no seed). */
    public static SamplingParams greedy(int maxTokens) {
        return new SamplingParams(0.0, 1.0, 0, null, maxTokens, List.of(), false);
    }

    /** Plain sampling at {@code temperature} with no top-k/top-p. */
    public static SamplingParams random(double temperature, Long seed, int maxTokens) {
        return new SamplingParams(temperature, 1.0, 0, seed, maxTokens, List.of(), false);
    }

    /** A copy with a different temperature. */
    public SamplingParams withTemperature(double t) {
        return new SamplingParams(t, topP, topK, seed, maxTokens, stopTokenIds, ignoreEos);
    }

    /** A copy with different top-k / top-p. */
    public SamplingParams withTopKTopP(int k, double p) {
        return new SamplingParams(temperature, p, k, seed, maxTokens, stopTokenIds, ignoreEos);
    }

    /** A copy with a different seed. */
    public SamplingParams withSeed(Long s) {
        return new SamplingParams(temperature, topP, topK, s, maxTokens, stopTokenIds, ignoreEos);
    }

    /**
     * Checks every field's range.
     *
     * @return {@code this}, for chaining
     * @throws IllegalArgumentException naming the first field out of range
     */
    public SamplingParams validate() {
        if (!(Double.isFinite(temperature) && temperature >= 0.0)) {
            throw new IllegalArgumentException(
                    "temperature must be a finite number >= 0, got " + temperature);
        }
        if (!(topP > 0.0 && topP <= 1.0)) {
            throw new IllegalArgumentException("topP must be in (0, 1], got " + topP);
        }
        if (topK < -1) {
            throw new IllegalArgumentException(
                    "topK must be -1 or 0 (disabled) or at least 1, got " + topK);
        }
        if (maxTokens < 1) {
            throw new IllegalArgumentException("maxTokens must be at least 1, got " + maxTokens);
        }
        for (Integer id : stopTokenIds) {
            if (id == null || id < 0) {
                throw new IllegalArgumentException(
                        "stopTokenIds must hold non-negative token ids, got " + id);
            }
        }
        return this;
    }

    /** Whether this request decodes greedily (argmax), i.e. {@code temperature < SAMPLING_EPS}. */
    public boolean isGreedy() {
        return temperature < SAMPLING_EPS;
    }

    /** Whether top-k filtering is active for a vocabulary of {@code vocabSize} tokens. */
    public boolean topKActive(int vocabSize) {
        return topK > 0 && topK < vocabSize;
    }

    /** Whether top-p filtering is active. */
    public boolean topPActive() {
        return topP < 1.0;
    }

    /** Whether {@code tokenId} is one of {@link #stopTokenIds()}. */
    public boolean isStopToken(int tokenId) {
        return stopTokenIds.contains(tokenId);
    }
}
