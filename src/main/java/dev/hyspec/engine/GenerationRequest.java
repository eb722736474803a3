package dev.hyspec.engine;

import dev.hyspec.sampling.SamplingParams;
import dev.hyspec.spec.Drafter;

/**
 * One generation as the engine sees it: token ids in, token ids out.
 *
 * @param id            unique id (the API's request id)
 * @param prompt        prompt token ids, at least one
 * @param sampling      sampling parameters (already validated)
 * @param numDrafts     drafts to propose per step: {@code null} uses the engine's default,
 *                      {@code 0} turns speculation off for this request
 * @param drafter       this request's drafter, or null for the engine's default (n-gram)
 * @param strategy      a rollback strategy id to pin, or null to let configuration decide
 * @param logprobs      report each generated token's logprob and this many top alternatives;
 *                      {@code -1}: no logprobs
 */
public record GenerationRequest(String id, int[] prompt, SamplingParams sampling, Integer numDrafts, Drafter drafter,
                                String strategy, int logprobs) {
    public GenerationRequest {
        prompt = prompt.clone();
    }

    public GenerationRequest(String id, int[] prompt, SamplingParams sampling, Integer numDrafts, Drafter drafter,
                             String strategy) {
        this(id, prompt, sampling, numDrafts, drafter, strategy, -1);
    }

    /** A request with the engine's default drafting and strategy. */
    public static GenerationRequest of(String id, int[] prompt, SamplingParams sampling) {
        return new GenerationRequest(id, prompt, sampling, null, null, null);
    }

    public GenerationRequest withDrafter(Drafter d, int drafts) {
        return new GenerationRequest(id, prompt, sampling, drafts, d, strategy, logprobs);
    }

    public GenerationRequest withStrategy(String s) {
        return new GenerationRequest(id, prompt, sampling, numDrafts, drafter, s, logprobs);
    }

    public GenerationRequest withLogprobs(int topN) {
        return new GenerationRequest(id, prompt, sampling, numDrafts, drafter, strategy, topN);
    }
}
