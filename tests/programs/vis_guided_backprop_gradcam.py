"""utkuozbulak/pytorch-cnn-visualizations, src/guided_backprop.py, src/gradcam.py and
src/misc_functions.py @ba22fa0: guided backpropagation (legacy register_backward_hook on the
first layer and on every ReLU, forward hooks storing ReLU outputs that the backward hook
rewrites in place, torch.clamp of grad_in, FloatTensor(1, n).zero_() one-hot gradient) and
Grad-CAM (a tensor hook registered mid-forward, backward(gradient=, retain_graph=True), numpy
weighting), then the grayscale and saliency helpers (shrunk: a small AlexNet-shaped model
with .features and .classifier on one random 3x32x32 image in place of the pretrained
AlexNet; Grad-CAM's PIL resize is left out)."""


def main(torch):
    import numpy as np
    import torch.nn as nn
    from torch.nn import ReLU

    class GuidedBackprop:
        """
        Produces gradients generated with guided back propagation from the given image
        """

        def __init__(self, model):
            self.model = model
            self.gradients = None
            self.forward_relu_outputs = []
            # Put model in evaluation mode
            self.model.eval()
            self.update_relus()
            self.hook_layers()

        def hook_layers(self):
            def hook_function(module, grad_in, grad_out):
                self.gradients = grad_in[0]

            # Register hook to the first layer
            first_layer = list(self.model.features._modules.items())[0][1]
            first_layer.register_backward_hook(hook_function)

        def update_relus(self):
            """
            Updates relu activation functions so that
                1- stores output in forward pass
                2- imputes zero for gradient values that are less than zero
            """

            def relu_backward_hook_function(module, grad_in, grad_out):
                """
                If there is a negative gradient, change it to zero
                """
                # Get last forward output
                corresponding_forward_output = self.forward_relu_outputs[-1]
                corresponding_forward_output[corresponding_forward_output > 0] = 1
                modified_grad_out = corresponding_forward_output * torch.clamp(grad_in[0], min=0.0)
                del self.forward_relu_outputs[-1]  # Remove last forward output
                return (modified_grad_out,)

            def relu_forward_hook_function(module, ten_in, ten_out):
                """
                Store results of forward pass
                """
                self.forward_relu_outputs.append(ten_out)

            # Loop through layers, hook up ReLUs
            for pos, module in self.model.features._modules.items():
                if isinstance(module, ReLU):
                    module.register_backward_hook(relu_backward_hook_function)
                    module.register_forward_hook(relu_forward_hook_function)

        def generate_gradients(self, input_image, target_class):
            # Forward pass
            model_output = self.model(input_image)
            # Zero gradients
            self.model.zero_grad()
            # Target for backprop
            one_hot_output = torch.FloatTensor(1, model_output.size()[-1]).zero_()
            one_hot_output[0][target_class] = 1
            # Backward pass
            model_output.backward(gradient=one_hot_output)
            # Convert Pytorch variable to numpy array
            # [0] to get rid of the first channel (1,3,224,224)
            gradients_as_arr = self.gradients.data.numpy()[0]
            return gradients_as_arr

    class CamExtractor:
        """
        Extracts cam features from the model
        """

        def __init__(self, model, target_layer):
            self.model = model
            self.target_layer = target_layer
            self.gradients = None

        def save_gradient(self, grad):
            self.gradients = grad

        def forward_pass_on_convolutions(self, x):
            """
            Does a forward pass on convolutions, hooks the function at given layer
            """
            conv_output = None
            for module_pos, module in self.model.features._modules.items():
                x = module(x)  # Forward
                if int(module_pos) == self.target_layer:
                    x.register_hook(self.save_gradient)
                    conv_output = x  # Save the convolution output on that layer
            return conv_output, x

        def forward_pass(self, x):
            """
            Does a full forward pass on the model
            """
            # Forward pass on the convolutions
            conv_output, x = self.forward_pass_on_convolutions(x)
            x = x.view(x.size(0), -1)  # Flatten
            # Forward pass on the classifier
            x = self.model.classifier(x)
            return conv_output, x

    class GradCam:
        """
        Produces class activation map
        """

        def __init__(self, model, target_layer):
            self.model = model
            self.model.eval()
            # Define extractor
            self.extractor = CamExtractor(self.model, target_layer)

        def generate_cam(self, input_image, target_class=None):
            # Full forward pass
            # conv_output is the output of convolutions at specified layer
            # model_output is the final output of the model (1, 1000)
            conv_output, model_output = self.extractor.forward_pass(input_image)
            if target_class is None:
                target_class = np.argmax(model_output.data.numpy())
            # Target for backprop
            one_hot_output = torch.FloatTensor(1, model_output.size()[-1]).zero_()
            one_hot_output[0][target_class] = 1
            # Zero grads
            self.model.features.zero_grad()
            self.model.classifier.zero_grad()
            # Backward pass with specified target
            model_output.backward(gradient=one_hot_output, retain_graph=True)
            # Get hooked gradients
            guided_gradients = self.extractor.gradients.data.numpy()[0]
            # Get convolution outputs
            target = conv_output.data.numpy()[0]
            # Get weights from gradients
            weights = np.mean(guided_gradients, axis=(1, 2))  # Take averages for each gradient
            # Create empty numpy array for cam
            cam = np.ones(target.shape[1:], dtype=np.float32)
            # Have a look at issue #11 to check why the above is np.ones and not np.zeros
            # Multiply each weight with its conv output and then, sum
            for i, w in enumerate(weights):
                cam += w * target[i, :, :]
            cam = np.maximum(cam, 0)
            cam = (cam - np.min(cam)) / (np.max(cam) - np.min(cam))  # Normalize between 0-1
            cam = np.uint8(cam * 255)  # Scale between 0-255 to visualize
            return cam

    def convert_to_grayscale(im_as_arr):
        """
            Converts 3d image to grayscale

        Args:
            im_as_arr (numpy arr): RGB image with shape (D,W,H)

        returns:
            grayscale_im (numpy_arr): Grayscale image with shape (1,W,D)
        """
        grayscale_im = np.sum(np.abs(im_as_arr), axis=0)
        im_max = np.percentile(grayscale_im, 99)
        im_min = np.min(grayscale_im)
        grayscale_im = np.clip((grayscale_im - im_min) / (im_max - im_min), 0, 1)
        grayscale_im = np.expand_dims(grayscale_im, axis=0)
        return grayscale_im

    def get_positive_negative_saliency(gradient):
        """
            Generates positive and negative saliency maps based on the gradient
        Args:
            gradient (numpy arr): Gradient of the operation to visualize

        returns:
            pos_saliency ( )
        """
        pos_saliency = np.maximum(0, gradient) / gradient.max()
        neg_saliency = np.maximum(0, -gradient) / -gradient.min()
        return pos_saliency, neg_saliency

    def model():
        torch.manual_seed(0)
        net = nn.Module()
        net.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 16, 3, padding=1),
            nn.ReLU(inplace=True),
        )
        net.classifier = nn.Sequential(
            nn.Dropout(), nn.Linear(16 * 8 * 8, 32), nn.ReLU(inplace=True), nn.Linear(32, 10)
        )
        net.forward = lambda x: net.classifier(net.features(x).view(x.size(0), -1))
        return net

    torch.manual_seed(1)
    prep_img = torch.rand(1, 3, 32, 32).requires_grad_()
    out = []
    GBP = GuidedBackprop(model())
    guided_grads = GBP.generate_gradients(prep_img, 3)
    out.append(guided_grads.sum().item())
    out.append(convert_to_grayscale(guided_grads).sum().item())
    pos_sal, neg_sal = get_positive_negative_saliency(guided_grads)
    out += [pos_sal.sum().item(), neg_sal.sum().item()]
    grad_cam = GradCam(model(), target_layer=6)
    cam = grad_cam.generate_cam(prep_img.detach(), 3)
    out += cam.flatten().tolist()
    return out
