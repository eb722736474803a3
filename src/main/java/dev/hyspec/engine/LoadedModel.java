package dev.hyspec.engine;

import dev.hyspec.model.HybridModel;
import dev.hyspec.tokenizer.ChatTemplate;
import dev.hyspec.tokenizer.Tokenizer;
import java.nio.file.Path;
import java.util.Optional;

/** A model being served: its id, folder, weights on a backend, and its tokenizer files if any. */
public record LoadedModel(String id, Path dir, HybridModel model, Optional<Tokenizer> tokenizer,
                          Optional<ChatTemplate> chatTemplate, long createdEpochSeconds) {}
