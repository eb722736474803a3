package dev.hyspec.spec;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.IntUnaryOperator;

/**
 * A drafter whose proposals follow a script, for engine tests and for experiments that need a
 * controlled acceptance pattern (e.g. "accept exactly 2 drafts at step 3").
 *
 * <p>The script is a function {@code (step, history) -> drafts}, where {@code step} is the 0-based
 * index of the {@link #propose} call on this instance. Every call counts as a step, including
 * calls with {@code numDrafts == 0}. Whatever the script returns is copied and truncated to {@code
 * numDrafts}, so the {@link Drafter} contract holds even for a careless script; a {@code null}
 * result means "no proposal".
 *
 * <p>Because of the step counter an instance is <b>request-scoped and not thread-safe</b>: create
 * one per request. It also records, for inspection by tests, every proposal it returned ({@link
 * #proposals()}) and every acceptance count reported through {@link #onAccepted} ({@link
 * #acceptedCounts()}).
 *
 * <h2>Factories</h2>
 *
 * <ul>
 *   <li>{@link #fromSteps(List)}: step {@code s} proposes the {@code s}-th array of a fixed list,
 *       and nothing once the list is exhausted.
 *   <li>{@link #forcingAcceptance}: given the continuation a greedy target model is known to
 *       produce, proposes drafts that a correct greedy verifier accepts exactly {@code a} of, with
 *       {@code a} chosen per step.
 *   <li>{@link #of(Script)}: any other script.
 * </ul>
 */
public final class ScriptedDrafter implements Drafter {

    /** The script: computes the drafts for one step. */
    @FunctionalInterface
    public interface Script {
        /**
         * @param step 0-based index of this {@code propose} call on the drafter
         * @param tokens the history buffer (read only, valid up to {@code length})
         * @param length number of valid history tokens
         * @param numDrafts the engine's draft budget; longer results are truncated to it
         * @return the drafts for this step, or {@code null}/empty for none
         */
        int[] draft(int step, int[] tokens, int length, int numDrafts);
    }

    private static final int[] EMPTY = new int[0];

    private final Script script;
    private int step;
    private final List<int[]> proposals = new ArrayList<>();
    private final List<Integer> accepted = new ArrayList<>();

    private ScriptedDrafter(Script script) {
        this.script = script;
    }

    /** A drafter that runs an arbitrary script. */
    public static ScriptedDrafter of(Script script) {
        if (script == null) {
            throw new IllegalArgumentException("script must not be null");
        }
        return new ScriptedDrafter(script);
    }

    /**
     * A drafter that proposes {@code steps.get(s)} at step {@code s} (truncated to the draft
     * budget) and nothing after the last element. The list and its arrays are copied.
     *
     * @throws IllegalArgumentException if {@code steps} or one of its elements is {@code null}
     */
    public static ScriptedDrafter fromSteps(List<int[]> steps) {
        if (steps == null) {
            throw new IllegalArgumentException("steps must not be null");
        }
        int[][] copy = new int[steps.size()][];
        for (int s = 0; s < copy.length; s++) {
            int[] drafts = steps.get(s);
            if (drafts == null) {
                throw new IllegalArgumentException("steps[" + s + "] must not be null");
            }
            copy[s] = drafts.clone();
        }
        return new ScriptedDrafter(
                (step, tokens, length, numDrafts) -> step < copy.length ? copy[step] : EMPTY);
    }

    /**
     * A drafter that forces a chosen number of accepted drafts per step, assuming the target model
     * decodes greedily and is known to produce {@code referenceContinuation} after a prompt of
     * {@code promptLength} tokens.
     *
     * <p>At step {@code s}, with history length {@code L}, the current position in the reference is
     * {@code p = L - promptLength} (tokens generated so far) and {@code a =
     * acceptedPerStep.applyAsInt(s)}. The proposal has {@code d = min(k, numDrafts,
     * referenceContinuation.length - p)} tokens: {@code draft[j] = ref[p+j]} for every {@code j < d}
     * except {@code j == a}, where {@code draft[a] = (ref[p+a] + 1) % vocabSize}, a token that is
     * guaranteed to differ from the reference. A correct greedy verifier therefore accepts exactly
     * {@code min(a, d)} drafts and emits {@code ref[p + min(a, d)]} itself, so the next step starts
     * at {@code p + min(a, d) + 1}. With {@code a == k} every draft is correct and there is no wrong
     * token.
     *
     * <p>The drafts after the wrong one are correct again on purpose: a verifier that wrongly
     * counts all matching drafts instead of the matching prefix then accepts more than {@code a}
     * and is caught by the test.
     *
     * <p>Near the end of the reference the proposal is shortened to the reference tokens that are
     * left (the tokens beyond it are unknown), and it is empty once the history has consumed the
     * whole reference. To keep tests honest, each step checks that the generated part of the
     * history equals the reference so far and throws {@link IllegalStateException} otherwise (a
     * non-greedy or buggy engine makes forced counts meaningless); the check costs {@code O(L)} per
     * step, which is fine for a test helper.
     *
     * @param referenceContinuation the tokens the target generates after the prompt (copied); each
     *     in {@code [0, vocabSize)}
     * @param promptLength number of prompt tokens at the start of every history, {@code >= 0}
     * @param acceptedPerStep step index to the number of drafts to accept, which must be in {@code
     *     [0, k]} (checked at each step with {@link IllegalArgumentException})
     * @param k drafts proposed per step before truncation, {@code >= 1}
     * @param vocabSize size of the vocabulary, {@code >= 2}, used to pick the wrong token
     * @throws IllegalArgumentException naming the offending parameter
     */
    public static ScriptedDrafter forcingAcceptance(
            int[] referenceContinuation,
            int promptLength,
            IntUnaryOperator acceptedPerStep,
            int k,
            int vocabSize) {
        if (referenceContinuation == null) {
            throw new IllegalArgumentException("referenceContinuation must not be null");
        }
        if (promptLength < 0) {
            throw new IllegalArgumentException("promptLength must be >= 0, got " + promptLength);
        }
        if (acceptedPerStep == null) {
            throw new IllegalArgumentException("acceptedPerStep must not be null");
        }
        if (k < 1) {
            throw new IllegalArgumentException("k must be >= 1, got " + k);
        }
        if (vocabSize < 2) {
            throw new IllegalArgumentException("vocabSize must be >= 2, got " + vocabSize);
        }
        int[] ref = referenceContinuation.clone();
        for (int j = 0; j < ref.length; j++) {
            if (ref[j] < 0 || ref[j] >= vocabSize) {
                throw new IllegalArgumentException(
                        "referenceContinuation[" + j + "] = " + ref[j]
                                + " is outside the vocabulary [0, " + vocabSize + ")");
            }
        }
        return new ScriptedDrafter(
                (step, tokens, length, numDrafts) -> {
                    int a = acceptedPerStep.applyAsInt(step);
                    if (a < 0 || a > k) {
                        throw new IllegalArgumentException(
                                "acceptedPerStep(" + step + ") must be in [0, k=" + k + "], got "
                                        + a);
                    }
                    int p = length - promptLength;
                    if (p < 0 || p > ref.length) {
                        throw new IllegalStateException(
                                "history length " + length + " is outside [promptLength="
                                        + promptLength + ", promptLength + reference length="
                                        + (promptLength + ref.length) + "]");
                    }
                    for (int j = 0; j < p; j++) {
                        if (tokens[promptLength + j] != ref[j]) {
                            throw new IllegalStateException(
                                    "generated token " + j + " is " + tokens[promptLength + j]
                                            + " but the reference continuation has " + ref[j]
                                            + "; forcingAcceptance assumes a greedy target that"
                                            + " reproduces the reference");
                        }
                    }
                    int d = Math.min(Math.min(k, numDrafts), ref.length - p);
                    int[] drafts = Arrays.copyOfRange(ref, p, p + d);
                    if (a < d) {
                        drafts[a] = (ref[p + a] + 1) % vocabSize;
                    }
                    return drafts;
                });
    }

    @Override
    public int[] propose(int[] tokens, int length, int numDrafts) {
        Drafter.checkProposeArgs(tokens, length, numDrafts);
        int[] drafts = script.draft(step, tokens, length, numDrafts);
        step++;
        int[] result =
                drafts == null || numDrafts == 0
                        ? EMPTY
                        : Arrays.copyOf(drafts, Math.min(drafts.length, numDrafts));
        proposals.add(result.clone());
        return result;
    }

    @Override
    public void onAccepted(int numProposed, int numAccepted) {
        accepted.add(numAccepted);
    }

    /** Number of {@link #propose} calls so far, i.e. the index of the next step. */
    public int steps() {
        return step;
    }

    /** Copies of every proposal returned so far, in step order. */
    public List<int[]> proposals() {
        List<int[]> copy = new ArrayList<>(proposals.size());
        for (int[] p : proposals) {
            copy.add(p.clone());
        }
        return copy;
    }

    /** The {@code numAccepted} values reported through {@link #onAccepted}, in call order. */
    public int[] acceptedCounts() {
        int[] out = new int[accepted.size()];
        for (int j = 0; j < out.length; j++) {
            out[j] = accepted.get(j);
        }
        return out;
    }
}
