package dev.hyspec.tokenizer;

import com.hubspot.jinjava.interpret.JinjavaInterpreter;
import com.hubspot.jinjava.lib.tag.Tag;
import com.hubspot.jinjava.tree.Node;
import com.hubspot.jinjava.tree.TagNode;

/**
 * transformers' {@code {% generation %}...{% endgeneration %}} block, which marks assistant text for
 * training masks; rendering a prompt just writes its contents.
 */
final class GenerationTag implements Tag {
    private static final long serialVersionUID = 1L;

    @Override
    public String getName() {
        return "generation";
    }

    @Override
    public String interpret(TagNode tagNode, JinjavaInterpreter interpreter) {
        StringBuilder out = new StringBuilder();
        for (Node child : tagNode.getChildren()) {
            out.append(child.render(interpreter).getValue());
        }
        return out.toString();
    }
}
